"""The apply of a small batch in the driver: the reference interpreter (cumulus/m3/
interpreter.py, the executable definition of M3 and the tests' oracle) runs the batch's
events over the maps their triggers read, both read through PyIceberg at the record's
pinned snapshots, and the updates it journals are the batch's delta rows. No Spark job
computes them: for a micro-batch of a few hundred events a Spark plan costs seconds of
planning and scheduling, the interpreter milliseconds. The commit is the Spark path's own
(apply.write_deltas): same record, same rows, same recovery.

Exactness: the interpreter takes the events relation by relation in the plan's order (the
batch semantics of evaluate.py; for programs compiled from SQL any order gives the same
result) and each event against the state its earlier ones left: the serial result that
the Spark plan computes. Arithmetic is exact (Decimal with 200 digits); a decimal delta is
rounded to the maps' scale as Spark's cast rounds it (half up). A value the maps' types
cannot hold as Spark would write it (an int beyond BIGINT, a decimal beyond DECIMAL(38,6)
or a decimal key finer than its scale) sends the batch the Spark way, as does a batch over
`apply_local_events` events or whose maps hold over `apply_local_rows` rows.

A rebuild or back-fill from base.* of at most `rebuild_local_rows` tuples is evaluated
here too (`driver_rebuild`): the same interpreter from an empty state, the derived
relations of nested queries included."""

from __future__ import annotations

import decimal
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cumulus.config import Settings
from cumulus.m3.ast import MapRef
from cumulus.m3.interpreter import EXACT, Event, Interpreter, canonical, coerce
from cumulus.schema import DECIMAL_SCALE
from cumulus.sql.derived import settle, settles_by_group
from cumulus.store.catalog import shared_catalog
from cumulus.store.maps import key_slots, value_slot
from cumulus.store.rows import scan_arrow
from cumulus.store.tables import tables_of

if TYPE_CHECKING:
    from cumulus.engine.apply import ApplyRecord
    from cumulus.engine.evaluate import BatchPlan

log = logging.getLogger("cumulus.apply")

IN_DRIVER, BY_SPARK = "in the driver", "by Spark"  # where a batch's or a rebuild's deltas were evaluated
_QUANTUM = decimal.Decimal(1).scaleb(-DECIMAL_SCALE)
_DECIMAL_LIMIT = decimal.Decimal(10) ** (38 - DECIMAL_SCALE)
_BIGINT_LIMIT = 1 << 63


@dataclass(frozen=True)
class DriverDeltas:
    """A batch's delta rows (tuples in the order of `columns` given to driver_deltas) and
    the bytes of the data files read for them."""

    rows: list[tuple]
    bytes_read: int


def driver_deltas(
    settings: Settings, plan: BatchPlan, record: ApplyRecord, counts: Mapping[str, int], columns: Sequence[str],
) -> DriverDeltas | None:
    """The delta rows of an apply's batch (`counts`: its events per relation, from the
    manifest), computed in the driver; None when the batch goes the Spark way (too many
    events, maps too large, or a value Spark would write otherwise)."""
    if record.kind != "apply" or not 0 < sum(counts.values()) <= settings.apply_local_events:
        return None
    catalog, read_bytes = shared_catalog(settings), [0]
    relations = [rel for rel in plan.order if counts.get(rel)]
    interpreter = Interpreter(plan.checked)
    read = _maps_read(plan, relations)
    if read and record.read_snapshot is not None:
        if not _load_maps(catalog, settings, plan, interpreter, read, record.read_snapshot, read_bytes):
            return None
    interpreter.journal = {}
    with decimal.localcontext(EXACT):
        for rel in relations:
            events = _events(catalog, settings, plan, record, rel, read_bytes)
            if len(events) != counts[rel]:
                log.warning("epoch %d source %d: the manifest counts %d %s events, the events table holds %d; "
                            "applying with Spark", record.epoch, record.source_id, counts[rel], rel, len(events))
                return None
            _process(interpreter, rel, events)
        rows = _delta_rows(plan, interpreter.journal, columns)
    return None if rows is None else DriverDeltas(rows, read_bytes[0])


def driver_rebuild(settings: Settings, plan: BatchPlan, tag: str | None, columns: Sequence[str]) -> DriverDeltas | None:
    """The delta rows of every map `plan`'s statements write, evaluated from an empty
    state over base.* (at `tag`, else main): each base tuple an insert of its
    multiplicity (a delete where it is negative), relation by relation in the plan's
    order, then the derived relations' rows (nested queries) as inserts, as the Spark
    rebuild evaluates them (recompute.evaluate_from_base).
    None when the base relations hold over `rebuild_local_rows` tuples (counted from
    their manifests, then as multiplicities), or a value is not as Spark would write
    it: the rebuild then goes the Spark way. TPC-H's 22 queries over 7,285 tuples: 2.9 s
    here against about 95 s as Spark plans, whose cost is per operator, not per row."""
    limit = settings.rebuild_local_rows
    if limit <= 0 or not all(settles_by_group(view) for view in plan.derived.values()):
        return None
    catalog, read_bytes = shared_catalog(settings), [0]
    tables = tables_of(settings)
    scans = {}
    for rel in plan.order:
        table = catalog.load_table(tables.base(rel).pyiceberg)
        snapshot = table.snapshot_by_name(tag) if tag is not None else table.current_snapshot()
        if snapshot is None:  # an empty table (no commit yet), or a tag that is gone
            if tag is not None:
                return None
            continue
        scans[rel] = table.scan(snapshot_id=snapshot.snapshot_id, selected_fields=(*plan.params[rel], "mult"))
    tasks = {rel: list(scan.plan_files()) for rel, scan in scans.items()}
    stored = sum(t.file.record_count for files in tasks.values() for t in files)
    if stored > limit:
        log.info("base.* holds %d rows (over rebuild_local_rows = %d): rebuilding with Spark", stored, limit)
        return None
    events = {rel: [(row[:-1], row[-1] or 0) for row in _columns(scan_arrow(scans[rel], tasks[rel], read_bytes),
                                                                   (*plan.params[rel], "mult"))] for rel in scans}
    if sum(abs(op) for tuples in events.values() for _, op in tuples) > limit:
        log.info("base.* holds over rebuild_local_rows = %d tuples (multiplicities): rebuilding with Spark", limit)
        return None
    interpreter = Interpreter(plan.checked)
    interpreter.journal = {}
    with decimal.localcontext(EXACT):
        for rel in plan.order:
            _process(interpreter, rel, events.get(rel, ()))
        # Then the derived relations' rows (nested queries), inserted as the Spark rebuild
        # inserts them (engine/derived.py), each after those it reads (sql/derived.py).
        settle(interpreter, plan.derived, {name: {} for name in plan.derived})
        written = {bs.statement.target.name for stmts in plan.statements.values() for bs in stmts}
        rows = _delta_rows(plan, {k: v for k, v in interpreter.journal.items() if k[0] in written}, columns)
    return None if rows is None else DriverDeltas(rows, read_bytes[0])


def _process(interpreter: Interpreter, rel: str, events: Iterable[tuple[tuple, int]]) -> None:
    """Each event of `rel` (values, op: a signed multiplicity) through the interpreter, as
    |op| inserts or deletes."""
    for values, op in events:
        event = Event("+" if op > 0 else "-", rel, tuple(values))
        for _ in range(abs(op)):
            interpreter.process(event)


def _columns(rows: Any, names: Sequence[str]) -> list[tuple]:
    """An Arrow table's rows as tuples of the columns `names`, in that order."""
    return list(zip(*(rows.column(c).to_pylist() for c in names), strict=True))


def _maps_read(plan: BatchPlan, relations: Sequence[str]) -> list[str]:
    """The maps the triggers of `relations` read (those the interpreter needs loaded)."""
    program = plan.checked.program
    triggers = [t for rel in relations for sign in "+-" if (t := program.trigger(sign, rel)) is not None]
    return sorted({e.name for t in triggers for s in t.statements for e in s.expr.walk() if isinstance(e, MapRef)})


def _load_maps(
    catalog: Any, settings: Settings, plan: BatchPlan, interpreter: Interpreter, names: list[str], snapshot: int,
    read_bytes: list[int],
) -> bool:
    """Load the entries of maps `names` at `snapshot` of maps.entries into the interpreter
    (each entry the sum of its rows); False when they hold over `apply_local_rows` rows."""
    from pyiceberg.expressions import In

    rows = _map_rows(catalog, settings, In("map", names), snapshot, read_bytes)
    if rows is None:
        return False
    for name, _, key, value in _entries(plan, rows, names):
        interpreter.state[name].add(key, value)
    return True


def _map_rows(catalog: Any, settings: Settings, where: Any, snapshot: int, read_bytes: list[int],
              step: str = "the apply") -> Any:
    """The rows of maps.entries at `snapshot` that `where` (a PyIceberg expression)
    selects, as Arrow; None when they are over `apply_local_rows` (from the manifests,
    before anything is read): then `step` goes to Spark, and the log says so."""
    scan = catalog.load_table(tables_of(settings).maps.pyiceberg).scan(row_filter=where, snapshot_id=snapshot)
    tasks = list(scan.plan_files())
    stored = sum(t.file.record_count for t in tasks)
    if stored > settings.apply_local_rows:
        log.info("maps read hold %d rows (over apply_local_rows = %d): %s by Spark", stored, settings.apply_local_rows, step)
        return None
    return scan_arrow(scan, tasks, read_bytes)


def _entries(plan: BatchPlan, rows: Any, names: Sequence[str]) -> Iterator[tuple[str, int, tuple, Any]]:
    """The rows (Arrow, shaped as maps.entries') of maps `names`: (map, epoch, key, value
    as the interpreter holds it); rows with no value are none."""
    import pyarrow.compute as pc

    have = set(rows.column_names)
    for name in names:
        info = plan.maps[name]
        slots = [*key_slots(info), value_slot(info.type)]
        if any(slot not in have for slot in slots):  # slots added after the snapshot: no rows of the map there
            continue
        part = rows.filter(pc.equal(rows["map"], name)).select(["epoch", *slots])
        for epoch, *key, value in zip(*(column.to_pylist() for column in part.columns), strict=True):
            if value is not None:
                yield name, epoch, tuple(map(canonical, key)), coerce(value, info.type)


def driver_derived(
    settings: Settings, plan: BatchPlan, epoch: int, snapshot: int, columns: Sequence[str],
) -> DriverDeltas | None:
    """The close's derived step (engine/derived.py: derive_epoch) in the driver: the maps
    the derived relations read, at `snapshot` of maps.entries, loaded twice, without
    epoch `epoch`'s rows (before) and with them (after); for every group of a derived
    relation that an entry of the epoch names, its rows over both are compared and the
    change is processed through the program over the after state, each relation after
    those it reads (sql/derived.py: settle); its journal is the step's delta rows. The
    Spark step's result, without its Spark jobs. None (the Spark way) when applies go
    the Spark way (apply_local_events = 0), the maps hold over `apply_local_rows` rows,
    or a value is not as Spark would write it."""
    from pyiceberg.expressions import And, In, LessThanOrEqual

    if settings.apply_local_events <= 0 or not all(settles_by_group(view) for view in plan.derived.values()):
        return None
    needed = plan.derived_reads
    read_bytes = [0]
    rows = _map_rows(shared_catalog(settings), settings, And(In("map", needed), LessThanOrEqual("epoch", epoch)),
                     snapshot, read_bytes, step="the derived relations' change")
    if rows is None:
        return None
    before, after = Interpreter(plan.checked), Interpreter(plan.checked)
    touched = set()
    for name, at, key, value in _entries(plan, rows, needed):
        after.state[name].add(key, value)
        if at < epoch:
            before.state[name].add(key, value)
        else:
            touched.add((name, key))
    after.journal = {}
    with decimal.localcontext(EXACT):
        settle(after, plan.derived, {name: {} for name in plan.derived}, touched=touched, before=before)
        out = _delta_rows(plan, after.journal, columns)
    return None if out is None else DriverDeltas(out, read_bytes[0])


def _events(
    catalog: Any, settings: Settings, plan: BatchPlan, record: ApplyRecord, rel: str, read_bytes: list[int],
) -> list[tuple[tuple, int]]:
    """The batch's events of `rel` (values in column order, op), in seq order: the rows of
    its ingest batches in the source's epoch partition, at the pinned snapshot."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import And, EqualTo

    snapshot = record.events_snapshots.get(rel)
    if snapshot is None:
        return []
    table = catalog.load_table(tables_of(settings).events(rel).pyiceberg)
    where = And(EqualTo("epoch", record.epoch), EqualTo("source_id", record.source_id))
    rows = scan_arrow(table.scan(row_filter=where, snapshot_id=snapshot), read_bytes=read_bytes)
    mine = rows.filter(pc.is_in(rows["batch_id"], value_set=pa.array(record.ingest_batches))).sort_by("seq")
    columns = [mine.column(c).to_pylist() for c in (*plan.params[rel], "op")]
    return [(tuple(row[:-1]), row[-1]) for row in zip(*columns, strict=True)]


def _delta_rows(plan: BatchPlan, journal: Mapping[tuple[str, tuple], Any], columns: Sequence[str]) -> list[tuple] | None:
    """The journal's non-zero sums as delta rows (the map's slots filled, the others
    NULL), or None when one holds a value Spark would write otherwise."""
    out = []
    position = {c: i for i, c in enumerate(columns)}
    for (name, key), total in journal.items():
        info = plan.maps[name]
        value = _value(total, info.type)
        if value is None:
            return None
        if value == 0:
            continue
        row: list[Any] = [None] * len(columns)
        row[position["map"]], row[position[value_slot(info.type)]] = name, value
        for slot, type_, k in zip(key_slots(info), info.key_types, key, strict=True):
            if type_ == "decimal" and k is not None and not _fits_scale(decimal.Decimal(k)):  # type: ignore[arg-type]
                return None
            row[position[slot]] = int(k) if type_ == "int" and k is not None else k
        out.append(tuple(row))
    return out


def _fits_scale(key: decimal.Decimal) -> bool:
    """Whether a decimal key is exact at the maps' scale (19.5000000 is, as 19.500000;
    19.5000001 is not: Spark's cast would round it)."""
    return key == key.quantize(_QUANTUM, context=EXACT)


def _value(total: Any, type_: str) -> Any:
    """A summed delta as the maps' value type stores it (None: not as Spark would)."""
    if type_ == "decimal":
        value = decimal.Decimal(total).quantize(_QUANTUM, rounding=decimal.ROUND_HALF_UP, context=EXACT)
        return value if abs(value) < _DECIMAL_LIMIT else None
    if type_ == "int":
        return total if isinstance(total, int) and abs(total) < _BIGINT_LIMIT else None
    return float(total)
