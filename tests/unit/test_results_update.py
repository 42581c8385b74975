"""When results.<view> may be updated by the groups an epoch touched, decided without
Spark (cumulus/engine/results.py): which views have rows found by group (view_groups,
touchable: a row per group, a bag of them, the first LIMIT of them), how the driver
makes a top-k view's rows from its table's and the touched groups' (top_rows), and which maps.entries snapshots hold a delta row of every entry that changed between
two tags (delta_snapshots), across applies, compactions, file rewrites and rebuilds. The
update itself is checked against the view at every epoch in tests/engine/test_epochs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cumulus.engine import results
from cumulus.engine.results import delta_snapshots
from cumulus.engine.results_rows import BAG, KEYED, TOP, Touch, top_rows, touchable
from cumulus.schema import load_schema
from cumulus.sql.mapsql import view_groups
from cumulus.sql.readtime import Order, Ref
from cumulus.sql.views import compile_views
from cumulus.store.commit import EPOCH
from cumulus.store.maps import COMPACTED_THROUGH

SCHEMA = load_schema(Path(__file__).resolve().parents[1] / "fixtures" / "schemas" / "nullable.sql")


def _meta(tags: dict[int, int], *snaps: tuple[int, int | None, dict]) -> dict:
    return {
        "current-snapshot-id": snaps[-1][0],
        "snapshots": [{"snapshot-id": i, "parent-snapshot-id": p, "summary": s} for i, p, s in snaps],
        "refs": {f"epoch-{e}": {"snapshot-id": snap, "type": "tag"} for e, snap in tags.items()},
    }


def _append(epoch: int) -> dict:
    return {"operation": "append", EPOCH: str(epoch)}


def test_appends_of_later_epochs_leave_the_later_tag_alone():
    meta = _meta({1: 1, 3: 4}, (1, None, _append(1)), (2, 1, _append(2)), (3, 2, {"operation": "replace"}),
                 (4, 3, _append(3)))
    assert delta_snapshots(meta, 1, 3) == [(4, 1)]


def test_a_compaction_past_the_earlier_tag_adds_the_rows_it_found():
    # compacted through 2 > 1: an entry zeroed at epoch 2 is gone from snapshot 4 on, its
    # delta row is in the compaction's parent (3); snapshot 5's rows of epoch 2 are the
    # compaction's sums (one per entry), so only its rows after 2 count
    meta = _meta({1: 1, 3: 5}, (1, None, _append(1)), (2, 1, _append(2)), (3, 2, _append(2)),
                 (4, 3, {"operation": "overwrite", COMPACTED_THROUGH: "2"}), (5, 4, _append(3)))
    assert delta_snapshots(meta, 1, 3) == [(5, 2), (3, 1)]
    # compacted through the earlier tag's epoch: only rows it showed already were summed
    meta = _meta({2: 3, 3: 5}, (1, None, _append(1)), (2, 1, _append(2)), (3, 2, _append(2)),
                 (4, 3, {"operation": "overwrite", COMPACTED_THROUGH: "2"}), (5, 4, _append(3)))
    assert delta_snapshots(meta, 2, 3) == [(5, 2)]


def test_compactions_one_after_another_each_add_their_parent_from_the_last_one_on():
    meta = _meta({1: 1, 4: 6}, (1, None, _append(1)), (2, 1, _append(2)),
                 (3, 2, {"operation": "overwrite", COMPACTED_THROUGH: "2"}), (4, 3, _append(3)),
                 (5, 4, {"operation": "overwrite", COMPACTED_THROUGH: "3"}), (6, 5, _append(4)))
    assert delta_snapshots(meta, 1, 4) == [(6, 3), (4, 2), (2, 1)]


@pytest.mark.parametrize("between", [
    {"operation": "overwrite"},
    # a rebuild of every map (recompute): its rows name the epoch, but an entry it left
    # out (zero now) has no delta row anywhere
    {"operation": "overwrite", COMPACTED_THROUGH: "2", EPOCH: "2"},
    {"operation": "delete"},
    _append(1),  # rows of an epoch the earlier tag already showed (a back-fill)
    {"operation": "append"},  # a commit that names no epoch
])
def test_anything_else_between_the_tags_means_a_whole_rewrite(between):
    meta = _meta({1: 1, 2: 3}, (1, None, _append(1)), (2, 1, between), (3, 2, _append(2)))
    assert delta_snapshots(meta, 1, 2) is None


def test_a_missing_tag_or_an_expired_ancestor_means_a_whole_rewrite():
    meta = _meta({2: 3}, (1, None, _append(1)), (2, 1, _append(2)), (3, 2, _append(2)))
    assert delta_snapshots(meta, 1, 2) is None
    meta = _meta({1: 1, 2: 3}, (1, None, _append(1)), (3, 2, _append(2)))  # snapshot 2 expired
    assert delta_snapshots(meta, 1, 2) is None


def _groups(sql: str):
    compiled = compile_views(SCHEMA, [("v", sql)])
    return view_groups(compiled.views["v"], compiled.checked.maps)


@pytest.mark.parametrize(("sql", "outputs"), [
    ("SELECT k, s, SUM(i) AS total, COUNT(*) AS n FROM u GROUP BY k, s", ("k", "s")),
    ("SELECT s AS label, k, AVG(f) AS mean FROM u GROUP BY k, s HAVING COUNT(*) > 1", ("k", "label")),
    ("SELECT u.k, MAX(w.m) AS top, MIN(u.dt) AS first FROM u, w WHERE u.k = w.k GROUP BY u.k", ("k",)),
    ("SELECT k, SUM(i) * 2 AS twice, COUNT(DISTINCT s) AS kinds FROM u GROUP BY k", ("k",)),
])
def test_views_with_one_row_per_group_shown_by_its_keys(sql, outputs):
    found = _groups(sql)
    assert found is not None, sql
    assert found[0] == outputs
    assert set(found[1]) == set(compile_views(SCHEMA, [("v", sql)]).views["v"].maps)


@pytest.mark.parametrize("sql", [
    "SELECT SUM(i) AS total FROM u",  # no groups: one row over everything
    "SELECT SUM(i) AS total FROM u GROUP BY k",  # the group is not shown: rows are not found by it
    "SELECT k, SUM(i) AS total FROM u GROUP BY k ORDER BY total DESC LIMIT 3",  # which groups show depends on all
    "SELECT k, s FROM u",  # rows as a bag
    "SELECT k, SUM(i) AS total FROM u GROUP BY k HAVING SUM(i) > (SELECT AVG(m) FROM w)",  # a subquery over all rows
])
def test_other_views_are_rewritten_whole(sql):
    assert _groups(sql) is None


@pytest.mark.parametrize(("sql", "shape", "order", "limit"), [
    ("SELECT k, SUM(i) AS total FROM u GROUP BY k", KEYED, (), 0),
    ("SELECT k, s FROM u", BAG, (), 0),  # each group's row its count times: the driver replaces them all
    ("SELECT k, SUM(i) AS total FROM u GROUP BY k ORDER BY total DESC LIMIT 3", TOP, ((Ref("total"), True),), 3),
    ("SELECT k, SUM(i) AS total FROM u GROUP BY k ORDER BY SUM(i) DESC LIMIT 3", TOP, ((Ref("total"), True),), 3),
    ("SELECT k, COUNT(*) AS n FROM u GROUP BY k LIMIT 5", TOP, (), 5),  # the first groups by key
    ("SELECT k, SUM(i) AS total FROM u GROUP BY k ORDER BY total LIMIT 3 OFFSET 1", None, (), 0),
    ("SELECT k, SUM(i) AS total FROM u GROUP BY k ORDER BY COUNT(*) LIMIT 3", None, (), 0),  # not shown
    ("SELECT k, s FROM u ORDER BY s LIMIT 3", None, (), 0),  # a bag's first rows: not ranked apart
    ("SELECT SUM(i) AS total FROM u GROUP BY k ORDER BY total LIMIT 3", None, (), 0),  # its group not shown
])
def test_the_shapes_of_rows_found_by_group(sql, shape, order, limit):
    compiled = compile_views(SCHEMA, [("v", sql)])
    touch = touchable(compiled.views["v"], compiled.checked.maps)
    if shape is None:
        assert touch is None, sql
        return
    assert (touch.shape, tuple((o.expr, o.desc) for o in touch.order), touch.limit) == (shape, order, limit), sql


def test_a_top_k_view_from_its_table_and_the_touched_groups_or_its_whole_query():
    """top_rows against the view's first rows over every group (sorted here on their own: DESC
    NULLS LAST, then the group key ascending, NULLs first, as Spark's ORDER BY of the
    view's SQL): over random tables and touched groups, it gives them or gives up (the
    whole query), and gives up only when fewer than `limit` candidates rank before the
    table's last row."""
    import random

    import pyarrow as pa

    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])

    def key(kv: tuple) -> tuple:
        k, v = kv
        return (v is None, -(v or 0), k is not None, k or 0)

    def first(rows: dict, limit: int) -> list[tuple]:
        return sorted(rows.items(), key=key)[:limit]

    def table(rows) -> pa.Table:
        return pa.Table.from_pylist([{"k": k, "v": v} for k, v in rows], schema=schema)

    rng = random.Random(5)
    gave = gave_up = 0
    for _ in range(400):
        limit = rng.choice([0, 1, 3, 5])
        keys = rng.sample([None, *range(30)], rng.randint(0, 20))
        old = {k: rng.choice([None, *range(8)]) for k in keys}
        current = first(old, limit)  # the table: the view's first rows at the last epoch
        touched = set(rng.sample([None, *range(40)], rng.randint(0, 8)))
        new = {k: v for k, v in old.items() if k not in touched}
        new |= {k: rng.choice([None, *range(10)]) for k in touched if rng.random() < 0.7}  # else: gone
        candidates = [(k, v) for k, v in current if k not in touched] + [(k, v) for k, v in new.items() if k in touched]
        touch = Touch((("k",), {}), TOP, (Order(Ref("v"), desc=True, nulls_first=False),), limit)
        got = top_rows(touch, table(current), table(candidates), "v")
        want = first(new, limit)
        if got is None:
            gave_up += 1
            assert len(current) == limit > 0
            assert sum(key(c) <= key(current[-1]) for c in candidates) < limit, (current, candidates)
        else:
            gave += 1
            assert [(r["k"], r["v"]) for r in got.to_pylist()] == want, (limit, old, touched, new)
    assert gave > 300 and gave_up > 5, (gave, gave_up)


def test_a_results_table_shows_its_tag_through_file_rewrites_only():
    from cumulus.engine.results import shows_epoch

    meta = _meta({2: 2}, (1, None, {"operation": "overwrite"}), (2, 1, {"operation": "overwrite"}),
                 (3, 2, {"operation": "replace"}))  # maintenance compacted its files since
    assert shows_epoch(meta, 2)
    assert not shows_epoch(meta, 1)  # no such tag
    meta = _meta({2: 2}, (1, None, {"operation": "overwrite"}), (2, 1, {"operation": "overwrite"}),
                 (3, 2, {"operation": "overwrite"}))  # a later write, the crash before its tag
    assert not shows_epoch(meta, 2)


def test_the_driver_drops_the_touched_groups_rows_as_a_merge_matches_them():
    """without_groups keeps the rows of untouched groups, of_groups those of the touched:
    NULL parts equal as `<=>` has them, keys cast to the columns' types (a bigint key slot, an int column), decimals
    and dates compared by value; a float group column is left to Spark."""
    import datetime
    from decimal import Decimal

    import pyarrow as pa

    from cumulus.engine.results_rows import of_groups, without_groups

    day = datetime.date(1995, 3, 15)
    current = pa.table({
        "k": pa.array([1, 2, None, 4, None, 2], pa.int32()),
        "d": pa.array([Decimal("1.50"), None, Decimal("2.00"), Decimal("3.00"), None, Decimal("1.50")],
                      pa.decimal128(15, 2)),
        "day": pa.array([day, day, day, None, day, day]),
        "name": pa.array(["a", "b", "", None, "e", "f"]),
        "total": pa.array([10, 20, 30, 40, 50, 60], pa.int64()),
    })
    keys = pa.table({  # touched: (2, NULL, day), (NULL, 2.000000, day), (4, 3.0, NULL) and an absent one
        "__g0": pa.array([2, None, 4, 9], pa.int64()),
        "__g1": pa.array([None, Decimal("2"), Decimal("3"), Decimal("1")], pa.decimal128(38, 6)),
        "__g2": pa.array([day, day, None, day]),
    })
    kept = without_groups(current, ("k", "d", "day"), keys, "v")
    assert kept.schema == current.schema
    assert sorted(kept.column("total").to_pylist()) == [10, 50, 60]
    # the touched groups' rows (the driver's reads of a map's entries of those groups): the others
    touched = of_groups(current, ("k", "d", "day"), keys, "v")
    assert touched.schema == current.schema
    assert sorted(touched.column("total").to_pylist()) == [20, 30, 40]
    # (NULL, NULL, day) is not (NULL, 2, day): a NULL part matches a NULL only
    one = without_groups(current, ("name",), pa.table({"__g0": pa.array([None, ""], pa.string())}), "v")
    assert sorted(one.column("total").to_pylist()) == [10, 20, 50, 60]
    floats = current.append_column("x", pa.array([0.0] * 6))
    assert without_groups(floats, ("x",), pa.table({"__g0": pa.array([-0.0])}), "v") is None
    too_big = pa.table({"__g0": pa.array([2**40], pa.int64())})
    assert without_groups(current, ("k",), too_big, "v") is None


def test_the_driver_finds_the_touched_keys_as_spark_does(tmp_path):
    """_touched_keys: each view's group keys (`__g<i>`, in group order whatever the
    order of a map's slots) of the delta rows of its maps alone, in each snapshot those
    of the epochs after its own (delta_snapshots' pairs), distinct, a NULL key one key,
    as _deltas and group_keys find them through Spark. No JVM: a PyIceberg SqlCatalog."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from cumulus.engine.results import _touched_keys

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w")
    catalog.create_namespace("maps")
    schema = pa.schema([("map", pa.string()), ("k0_int", pa.int64()), ("k1_string", pa.string()),
                        ("v_int", pa.int64()), ("epoch", pa.int64())])
    table = catalog.create_table("maps.entries", schema=schema)

    def append(rows: list[tuple]) -> int:
        table.append(pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema))
        return table.current_snapshot().snapshot_id

    first = append([("m1", 1, "a", 1, 1), ("m2", 2, None, 1, 1)])
    second = append([("m1", 3, "b", 1, 2), ("m1", None, "c", -1, 2), ("m1", 3, "d", 2, 2),
                     ("m2", None, None, 1, 2), ("m2", 5, None, -1, 2), ("m3", 9, None, 1, 2)])
    touches = {"v": Touch((("g",), {"m1": (("k0_int", 0),), "m2": (("k0_int", 0),)}), KEYED),
               "w": Touch((("g", "h"), {"m1": (("k1_string", 1), ("k0_int", 0))}), KEYED)}

    def keys(snapshots: list[tuple[int, int]]) -> dict[str, set[tuple]]:
        found = _touched_keys(catalog.load_table("maps.entries"), touches, snapshots)
        rows = {v: [tuple(r[f"__g{i}"] for i in range(len(touches[v].groups[0]))) for r in t.to_pylist()]
                for v, t in found.items()}
        assert all(len(r) == len(set(r)) for r in rows.values())  # distinct
        return {v: set(r) for v, r in rows.items()}

    assert keys([(second, 1)]) == {"v": {(3,), (None,), (5,)}, "w": {(3, "b"), (None, "c"), (3, "d")}}
    # a compaction's parent (delta_snapshots): its rows of the epochs after `since` too
    assert keys([(second, 2), (first, 0)]) == {"v": {(1,), (2,)}, "w": {(1, "a")}}
    assert keys([(second, 0)])["v"] == {(1,), (2,), (3,), (None,), (5,)}


def test_the_driver_cuts_a_min_or_max_map_to_its_extremes_and_gets_the_same_row():
    """A MIN/MAX without GROUP BY reads a map of value counts, one entry per value: the
    driver keeps its entries of each extreme alone (extremes_of, summed first, a value
    whose rows sum to zero left out), and view_rows gives the same row as from every
    entry, through inserts and deletes of the extremes, NULLs, and every ordered type.
    Maps read otherwise (a count, a sum, a GROUP BY's, a float's values) are left whole."""
    import random
    from datetime import date
    from decimal import Decimal

    import pyarrow as pa

    from cumulus.engine.results_rows import extreme_domains, extremes_of
    from cumulus.m3.interpreter import Event, Interpreter
    from cumulus.sql.views import view_rows
    from cumulus.store.maps import key_slots, summed_entries, value_slot

    sql = ("SELECT MIN(i) AS lo, MAX(i) AS hi, MIN(s) AS first, MAX(dt) AS last, MAX(d) AS top, MIN(b) AS fb, "
           "MIN(f) AS low_f, COUNT(*) AS n, SUM(j) AS total FROM u")
    compiled = compile_views(SCHEMA, [("v", sql), ("g", "SELECT k, MAX(i) AS hi FROM u GROUP BY k")])
    plan, maps = compiled.views["v"], compiled.checked.maps
    found = extreme_domains([plan], maps)
    cut = {c.name: c.values.map for c in plan.columns if c.values is not None and c.values.map in found}
    assert set(cut) == {"lo", "hi", "first", "last", "top", "fb"}, found
    for c in plan.columns:  # each with the extreme its column takes, of its value's slot
        if c.name in cut:
            assert (key_slots(maps[cut[c.name]])[c.values.keys.index(c.value_var)], c.kind) in found[cut[c.name]]
    assert extreme_domains([compiled.views["g"]], maps) == {}
    assert extreme_domains([plan, compiled.views["g"]], maps).keys() == found.keys() - set(compiled.views["g"].maps)

    rng = random.Random(7)

    def row():
        pick = lambda *values: rng.choice([*values, None])  # noqa: E731
        return (1, pick(*range(-3, 4)), 0, pick(Decimal("1.50"), Decimal("-2.25"), Decimal("9.99")), pick(0.5, -1.0),
                pick("a", "é", "zz", ""), pick(date(2020, 1, 1), date(1999, 12, 31)), pick(True, False))

    interp, alive = Interpreter(compiled.checked), []
    for step in range(120):
        if alive and rng.random() < 0.4:
            interp.process(Event("-", "u", alive.pop(rng.randrange(len(alive)))))
        else:
            alive.append(row())
            interp.process(Event("+", "u", alive[-1]))
        if step % 10:
            continue

        def beyond(value):  # a value past every one drawn (its rows will sum to zero)
            if value is None or isinstance(value, bool):
                return value
            return {int: 100, Decimal: Decimal("1000"), float: 100.0, str: "~~~", date: date(2100, 1, 1)}[type(value)]

        def arrow(name: str) -> pa.Table | None:  # each entry as two rows, and a key past all whose rows sum to 0
            info, entries = maps[name], interp.entries(name)
            keys = [k for k in entries for _ in range(2)]
            values = [x for v in entries.values() for x in (v + 1, -1)]
            if entries and info.key_types:
                keys += [tuple(beyond(v) for v in next(iter(entries)))] * 2
                values += [3, -3]
            columns = {slot: [k[i] for k in keys] for i, slot in enumerate(key_slots(info))}
            return pa.table({**columns, value_slot(info.type): values}) if keys else None

        def read(name: str, cutting: bool):
            rows = arrow(name)
            if rows is None:
                return {}
            return summed_entries(extremes_of(rows, maps[name], found[name]) if cutting and name in found else rows,
                                  maps[name])

        whole = view_rows(plan, lambda name: read(name, False))
        assert whole == view_rows(plan, interp.entries), step
        assert view_rows(plan, lambda name: read(name, True)) == whole, (step, alive)


def test_the_driver_updates_by_groups_only_of_types_it_finds_rows_by():
    def meta(**types):
        return {"current-schema-id": 1, "schemas": [{"schema-id": 1, "fields": [
            {"id": i, "name": n, "type": t, "required": False} for i, (n, t) in enumerate(types.items(), 1)]}]}

    kinds = meta(k="string", n="long", d="date", p="decimal(12, 2)", b="boolean", i="int", v="double")
    assert results._driver_touches(kinds, ("k", "n", "d", "p", "b", "i"))
    assert not results._driver_touches(kinds, ("k", "v"))  # a float group: Spark's <=>
    assert not results._driver_touches(kinds, ("k", "missing"))
    assert not results._driver_touches(meta(k="string", at="timestamptz"), ("k",))  # a timestamp anywhere
    assert not results._driver_touches(meta(k="timestamp", v="long"), ("k",))
    assert not results._driver_touches(meta(k="binary", v="long"), ("k",))


def test_the_driver_writes_row_deltas_of_unpartitioned_tables_only():
    def meta(*fields):
        return {"default-spec-id": 1, "partition-specs": [
            {"spec-id": 0, "fields": []},
            {"spec-id": 1, "fields": [{"name": n, "transform": "identity", "source-id": 1, "field-id": 1000}
                                      for n in fields]}]}

    assert results._unpartitioned(meta())
    assert not results._unpartitioned(meta("k"))
