"""The read API (the paper's Figure 3) over PyIceberg, without a JVM.

    READ_SLICE(map, k1, ..., kn)   entries matching the given keys (None: any), on main:
                                   every applied delta, fresh, eventually consistent
    READ_SUM / READ_MIN / READ_MAX the slice's values pre-aggregated
    READ_STABLE(map, agg, keys...) the same at the stable (published) epoch's tag `epoch-N`
                                   (or a given epoch): consistent
    read_view(name)                a view's rows exactly as its SQL would give them

The maps live in one table, maps.entries, as delta rows (cumulus/store/maps.py): every
read takes the map's partition, sums the rows of each key and drops the keys whose sum
is zero."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cumulus.config import Settings
from cumulus.errors import ReadError
from cumulus.m3.printer import fingerprint
from cumulus.output import text
from cumulus.sql.views import view_rows
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.home import load_home_schema
from cumulus.store.ledger import ledger_rows
from cumulus.store.maps import (
    PROGRAM,
    PROGRAM_SINCE,
    entries_scan,
    key_slots,
    read_entries,
    summed_entries,
    value_slot,
)
from cumulus.store.registry import live, registry
from cumulus.store.tables import tables_of, tag_name


@dataclass(frozen=True)
class At:
    """Which state to read: main (None) or a closed epoch's tag."""

    epoch: int | None = None

    @property
    def tag(self) -> str | None:
        return None if self.epoch is None else tag_name(self.epoch)


class Reader:
    def __init__(self, settings: Settings, catalog=None):
        self.settings = settings
        self.catalog = catalog if catalog is not None else pyiceberg_catalog(settings)

    # -- metadata
    @cached_property
    def compilation(self):
        from cumulus.engine.registry import compile_registered

        rows = registry(self.catalog, self.settings)
        if not live(rows):
            raise ReadError(f"no view is registered in {self.settings.home} (cumulus view add NAME VIEW.sql)")
        return compile_registered(load_home_schema(self.settings), rows, self.settings.sql_dialect)

    def latest_epoch(self) -> int:
        """The stable epoch: the latest published (cumulus/engine/publish.py)."""
        from cumulus.engine.publish import stable_epoch

        row = stable_epoch(self.settings, ledger_rows(self.catalog, self.settings))
        if row is None:
            raise ReadError("no epoch is published yet: there is no stable snapshot (cumulus epoch close, "
                            "then cumulus validate; cumulus epoch status)")
        return row.epoch

    def stable(self, epoch: int | None = None) -> At:
        return At(self.latest_epoch() if epoch is None else epoch)

    # -- maps
    def entries(self, name: str, keys: Sequence[Any] = (), at: At = At()) -> dict[tuple, Any]:
        """Entries of a map matching `keys` (a prefix of its keys; None is a wildcard)."""
        from pyiceberg.expressions import And, EqualTo

        info = self._map(name)
        if len(keys) > info.arity:
            raise ReadError(f"map {name} has {info.arity} keys ({', '.join(info.key_names)}); got {len(keys)}")
        table, snapshot_id = self._maps_at(at)
        slots = key_slots(info)
        expr = EqualTo("map", name)
        for slot, value in zip(slots, keys, strict=False):
            if value is not None:
                expr = And(expr, EqualTo(slot, value))
        rows = table.scan(row_filter=expr, snapshot_id=snapshot_id, selected_fields=(*slots, value_slot(info.type)))
        return summed_entries(rows.to_arrow(), info)

    def all_entries(self, at: At = At(), maps: Sequence[str] | None = None):
        """Every map's entries at `at` (or those of `maps`) from one scan of maps.entries: a
        function of the map's name, for reading many maps or views at one snapshot (one
        table load and one scan to plan, not one per map)."""
        table, snapshot_id = self._maps_at(at)
        wanted = self.compilation.checked.maps if maps is None else {m: self._map(m) for m in maps}
        return read_entries(entries_scan(table, snapshot_id, wanted, every=maps is None), wanted)

    def _map(self, name: str):
        info = self.compilation.checked.maps.get(name)
        if info is None:
            raise ReadError(f"unknown map {name}")
        return info

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.compilation.program)

    def _maps_at(self, at: At):
        """maps.entries and the snapshot id to read for `at` (None: main). Refused where
        the maps were written with another program than the registered views compile to
        (a newer Cumulus: the next close rebuilds them), or at a tag from before the
        rebuild that made them this program's."""
        table = self.catalog.load_table(tables_of(self.settings).maps.pyiceberg)
        mark, since = table.properties.get(PROGRAM), table.properties.get(PROGRAM_SINCE)
        current = table.current_snapshot()
        empty = current is None or current.summary is None or int(current.summary["total-records"] or 0) == 0
        if mark != self.fingerprint and not (mark is None and empty):
            raise ReadError("the maps of this home were written by another version of Cumulus (or for another "
                            "program): the next `cumulus epoch close` rebuilds them from base.* (docs/engine.md, "
                            "'Rebuilding the maps')")
        if at.epoch is not None and since is not None and at.epoch < int(since):
            raise ReadError(f"epoch {at.epoch} was closed by an older version of Cumulus, whose maps were rebuilt "
                            f"at epoch {since}: read epoch {since} or later")
        if at.tag is None:
            return table, None
        snap = table.snapshot_by_name(at.tag)
        if snap is None:
            raise ReadError(f"the maps have no tag {at.tag} (epochs close into tags; see cumulus epoch status)")
        return table, snap.snapshot_id

    def read_slice(self, name: str, *keys: Any, at: At = At()) -> dict[tuple, Any]:
        return self.entries(name, keys, at)

    def read_sum(self, name: str, *keys: Any, at: At = At()):
        return sum(self.entries(name, keys, at).values())

    def read_min(self, name: str, *keys: Any, at: At = At()):
        values = self.entries(name, keys, at).values()
        return min(values) if values else None

    def read_max(self, name: str, *keys: Any, at: At = At()):
        values = self.entries(name, keys, at).values()
        return max(values) if values else None

    def read_stable(self, name: str, agg: str = "slice", *keys: Any, epoch: int | None = None):
        reads = {"slice": self.read_slice, "sum": self.read_sum, "min": self.read_min, "max": self.read_max}
        if agg not in reads:
            raise ReadError(f"unknown aggregate {agg!r} (slice, sum, min, max)")
        return reads[agg](name, *keys, at=self.stable(epoch))

    # -- views
    def view_columns(self, name: str) -> tuple[str, ...]:
        return self._plan(name).column_names

    def read_view(self, name: str, at: At = At(), where: dict[str, Any] | None = None, entries=None) -> list[tuple]:
        """A view's rows, columns in SELECT order, in the view's ORDER BY (else sorted);
        `where` keeps rows whose named columns equal the given values. `entries`: all_entries(at), when reading several."""
        plan = self._plan(name)
        rows = view_rows(plan, entries or self.all_entries(at, plan.maps))
        if where:
            index = {c: i for i, c in enumerate(plan.column_names)}
            unknown = sorted(set(where) - set(index))
            if unknown:
                raise ReadError(f"view {name} has no column {', '.join(unknown)} (columns: {', '.join(plan.column_names)})")
            rows = [r for r in rows if all(_text(r[index[c]]) == _text(v) for c, v in where.items())]
        return plan.presented(rows)

    def _plan(self, name: str):
        plan = self.compilation.views.get(name)
        if plan is None:
            raise ReadError(f"unknown view {name} (views: {', '.join(self.compilation.views) or 'none'})")
        return plan


def _text(value) -> str:
    return text(value)
