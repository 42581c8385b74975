"""A results table's rows in the driver (cumulus/engine/results.py): how a view's rows
are found by group (`touchable`: KEYED, BAG, TOP), and the Arrow work of the driver's
writes: the rows of some groups (`of_groups`) or of the others (`without_groups`),
compared as Spark's `<=>` does; a top-k's first rows from the table's and the touched
groups' (`top_rows`); rows made to fit the table's columns exactly (`arrow_rows` for the
driver's own, `fitted_rows` for Spark's), or refused (logged), which Spark then writes;
a MIN/MAX's map of values cut to its extremes before the driver's Python reads it
(`extreme_domains`, `extremes_of`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cumulus.sql.mapsql import ViewGroups, view_groups
from cumulus.sql.readtime import Order, Ref, ranked
from cumulus.sql.views import ViewPlan
from cumulus.store.maps import key_slots, value_slot

if TYPE_CHECKING:
    import pyarrow as pa

    from cumulus.m3.validate import MapInfo

log = logging.getLogger("cumulus.results")


KEYED, BAG, TOP = "keyed", "bag", "top"  # a view's rows by group: one each; its count times; the first LIMIT


@dataclass(frozen=True)
class Touch:
    """How a view's results table may be updated by the groups an epoch touched: its groups
    (view_groups: their output columns, and each map's key slots of them) and the shape of
    its rows: KEYED, a row per group (a MERGE or the driver replaces a group's row); BAG,
    a group's row as many times as it occurs (the driver replaces a group's rows); TOP,
    the first `limit` rows by `order` (over the view's columns, ties broken by its group
    columns) of rows keyed by group: the driver ranks the table's rows of the untouched
    groups with the touched groups' rows (top_rows)."""

    groups: ViewGroups
    shape: str
    order: tuple[Order, ...] = ()
    limit: int = 0


def touchable(plan: ViewPlan, maps: Mapping[str, object]) -> Touch | None:
    """The view's Touch, or None when its rows are not found by group (module doc)."""
    found = view_groups(plan, maps)
    if found is not None:
        return Touch(found, KEYED)
    finish = plan.finish
    if plan.refresh != "incremental" or finish is not None and finish.offset:
        return None
    if finish is None or finish.limit is None:
        found = view_groups(replace(plan, bag=False), maps) if plan.bag else None
        return None if found is None else Touch(found, BAG)
    names = [n for n, _ in finish.select]
    order = tuple(Order(Ref(next(n for n, e in finish.select if e == o.expr)), o.desc, o.nulls_first)
                  for o in finish.order if any(e == o.expr for _, e in finish.select))
    if plan.bag or len(order) < len(finish.order) or len(set(names)) < len(names):
        return None  # an ORDER BY over what the view does not show: its table cannot rank its rows
    found = view_groups(replace(plan, finish=replace(finish, limit=None)), maps)
    return None if found is None else Touch(found, TOP, order, finish.limit)


def top_rows(touch: Touch, current: pa.Table, candidates: pa.Table, view: str) -> pa.Table | None:
    """A TOP view's rows at the epoch from its table's rows at the last one (`current`)
    and `candidates`: those of its untouched groups, with the touched groups' rows. Every
    other group's row is unchanged and ranked after the table's last row, so the first
    `limit` candidates are the view's first rows when at least `limit` of them rank no
    later than that last row (or the table held fewer than `limit` rows: the view had no
    others). None (logged) otherwise: the view's whole query finds them."""
    import pyarrow as pa

    outputs = touch.groups[0]
    limit = touch.limit
    old = ranked(touch.order, current.to_pylist(), outputs)
    new = candidates.to_pylist()
    if len(old) >= limit > 0:
        marker = dict(old[limit - 1], __cumulus_marker=True)  # ranked after candidates equal to it
        by_rank = ranked(touch.order, [*new, marker], outputs)
        if next(i for i, r in enumerate(by_rank) if r is marker) < limit:
            log.info("results.%s: fewer than %d touched or kept rows rank before its last row: its whole query",
                     view, limit)
            return None
    first = ranked(touch.order, new, outputs)[:limit]
    return pa.Table.from_pylist(first, schema=candidates.schema)


def without_groups(current: pa.Table, outputs: tuple[str, ...], keys: pa.Table, view: str) -> pa.Table | None:
    """The rows of `current` whose group (the `outputs` columns, one per group index) is
    none of `keys`' (`__g<i>`), compared as the MERGE's `<=>` does (of_groups)."""
    return of_groups(current, outputs, keys, view, "left anti")


def of_groups(rows: pa.Table, columns: tuple[str, ...], keys: pa.Table, view: str,
               how: str = "left semi") -> pa.Table | None:
    """The rows of `rows` whose group (the `columns`, one per group index i) is one of
    `keys`' (`__g<i>`), or (`how` "left anti") none of them, compared as Spark's `<=>`
    does: a NULL part equals a NULL. A part is held as (is NULL, value or a filler) and
    the two joined on those columns (Arrow's hash join never matches a NULL). None
    (logged) for a float group column (-0.0 and NaN compare otherwise in Spark) or a key
    its column cannot hold."""
    import pyarrow as pa
    import pyarrow.compute as pc

    probe, found = {}, {}
    for i, column in enumerate(columns):
        type_ = rows.schema.field(column).type
        filler = _filler(type_)
        try:
            key = keys.column(f"__g{i}").cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            log.warning("results.%s: a touched key does not fit column %s (%s): written by Spark", view, column, e)
            return None
        if filler is None:
            log.info("results.%s: group column %s of type %s: written by Spark", view, column, type_)
            return None
        for side, values in ((probe, rows.column(column)), (found, key)):
            side[f"__cumulus_null{i}"] = pc.is_null(values)
            side[f"__cumulus_value{i}"] = pc.fill_null(values, filler)
    joined = pa.table({**{c: rows.column(c) for c in rows.column_names}, **probe})
    return joined.join(pa.table(found), keys=list(found), join_type=how).select(rows.column_names)


def _filler(type_: pa.DataType) -> pa.Scalar | None:
    """A value of `type_` to stand for NULL in a join key (beside its is-NULL flag); None
    for a type whose equality is not Spark's (floats) or that a key is never of."""
    import datetime
    from decimal import Decimal

    import pyarrow as pa

    for is_type, value in ((pa.types.is_string, ""), (pa.types.is_large_string, ""), (pa.types.is_boolean, False),
                           (pa.types.is_integer, 0), (pa.types.is_decimal, Decimal(0)),
                           (pa.types.is_date32, datetime.date(1970, 1, 1))):
        if is_type(type_):
            return pa.scalar(value, type_)
    return None


def arrow_rows(schema: pa.Schema, view: str, plan: ViewPlan, rows: list[tuple]) -> pa.Table | None:
    """The view's rows as an Arrow table of its results table's columns; None (logged) when
    they do not fit them exactly (other columns, or a value the column's type would round)."""
    import pyarrow as pa

    if not _view_columns(schema, view, plan):
        return None
    if any(pa.types.is_timestamp(f.type) for f in schema):  # (a naive datetime's zone would be guessed)
        log.info("results.%s: a timestamp column: written by Spark", view)
        return None
    try:
        columns = [pa.array([r[i] for r in rows], type=field.type) for i, field in enumerate(schema)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        _does_not_fit(view, e)
        return None
    return pa.Table.from_arrays(columns, schema=schema)


def _view_columns(schema: pa.Schema, view: str, plan: ViewPlan) -> bool:
    """Whether a results table's columns are its view's, by name and order (logged when not)."""
    if list(schema.names) == list(plan.column_names):
        return True
    log.info("results.%s: its columns (%s) are not the view's (%s): written by Spark", view,
             ", ".join(schema.names), ", ".join(plan.column_names))
    return False


def _does_not_fit(view: str, error: Exception) -> None:
    log.warning("results.%s: a row does not fit the table's columns from the driver (%s): written by Spark",
                view, error)


def fitted_rows(schema: pa.Schema, view: str, plan: ViewPlan, rows: pa.Table) -> pa.Table | None:
    """Rows of a view for the driver to write as an Arrow table of its results table's columns; None
    (logged) when they are not those columns with those types (a view added again with
    others: Spark makes the table again) or a NULL would go in a required column."""
    import pyarrow as pa

    def plain(type_: pa.DataType) -> pa.DataType:  # (PyIceberg reads and writes strings as large ones)
        return pa.string() if pa.types.is_large_string(type_) else type_

    if not _view_columns(schema, view, plan):
        return None
    if [plain(t) for t in rows.schema.types] != [plain(t) for t in schema.types]:
        log.info("results.%s: its column types (%s) are not the query's (%s): written by Spark", view,
                 ", ".join(map(str, schema.types)), ", ".join(map(str, rows.schema.types)))
        return None
    try:
        return rows.rename_columns(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as e:  # (a NULL: required)
        _does_not_fit(view, e)
        return None


# Key types whose order Arrow's min/max and view_rows's Python agree on (a float's NaN
# sorts last in Spark and view_rows, and Arrow skips it).
_ORDERED_KEYS = frozenset({"int", "decimal", "string", "date", "bool"})


def extreme_domains(plans: Iterable[ViewPlan], maps: Mapping[str, MapInfo]) -> dict[str, frozenset[tuple[str, str]]]:
    """The maps that `plans` read only as the values of MIN/MAX columns of views without
    GROUP BY (each map with its (key slot, "min" | "max") pairs): the driver needs only
    their entries of each extreme value (`extremes_of`), not the whole domain, which a
    MIN or MAX over a column of many values holds one entry per value of (1.5 million
    for TPC-H SF 1's o_totalprice)."""
    found: dict[str, set[tuple[str, str]]] = {}
    barred: set[str] = set()
    for plan in plans:
        simple = not (plan.group or plan.subviews or plan.relations or plan.others or plan.bag)
        for use in plan.uses:  # (one MapUse may serve several columns: MIN(x) and MAX(x))
            info = maps[use.map]
            columns = [c for c in plan.columns if c.values is use]
            if (not simple or use is plan.count or info.type != "int" or not columns
                    or any(c.nonnull is use for c in plan.columns)
                    or any(c.kind not in ("min", "max") or c.value_var not in use.keys for c in columns)):
                barred.add(use.map)
                continue
            for column in columns:
                slot = use.keys.index(column.value_var)
                if info.key_types[slot] not in _ORDERED_KEYS:
                    barred.add(use.map)
                else:
                    found.setdefault(use.map, set()).add((key_slots(info)[slot], column.kind))
        barred.update(m for s in plan.subviews for m in s.read_maps)
    return {m: frozenset(pairs) for m, pairs in found.items() if m not in barred}


def extremes_of(rows: pa.Table, info: MapInfo, extremes: frozenset[tuple[str, str]]) -> pa.Table:
    """A map's Arrow rows (its key and value slots; several rows of a key are summed)
    reduced to its entries (a positive count) of each extreme (extreme_domains) of a
    non-NULL value: what view_rows takes MIN and MAX of, the other values left out."""
    import pyarrow.compute as pc

    slots, value = key_slots(info), value_slot(info.type)
    summed = rows.group_by(slots).aggregate([(value, "sum")]).rename_columns([*slots, value])
    live = summed.filter(pc.greater(summed.column(value), 0))
    keep = None
    for slot, kind in sorted(extremes):
        column = live.column(slot)
        found = (pc.min if kind == "min" else pc.max)(column)
        if found.is_valid:
            match = pc.fill_null(pc.equal(column, found), False)
            keep = match if keep is None else pc.or_(keep, match)
    return live.slice(0, 0) if keep is None else live.filter(keep)
