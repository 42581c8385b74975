"""The results tables: at each publish, every registered view's rows at tag `epoch-N`,
exactly as its SQL gives them (the read-time layer applied: view_sql), in the plain
Iceberg table `results.<view>`, tagged `epoch-N`, so that any Iceberg reader (PyIceberg,
DuckDB, Trino, Spark) reads a view by name at every published epoch with no Cumulus code.

A view's table moves from the epoch M it shows to N in one commit, one of three ways:

- by the groups the epochs since M touched (`touched`): the group keys of the maps'
  delta rows of epochs M+1..N (their files alone: maps.entries rows carry their epoch),
  the view's rows of those groups at N (their maps' entries of those keys only), and each
  touched group's rows replaced, inserted or deleted. For a view whose rows are found
  by their group columns (`touchable`): one per group (KEYED, `view_groups`), a group's
  row as many times as it occurs (BAG: a SELECT without aggregates), or the first
  LIMIT rows of rows keyed by group by an ORDER BY over the view's columns (TOP: the
  table's rows of untouched groups and the touched groups' rows ranked together give
  them when at least LIMIT rank no later than the table's last row, which every other
  group's row follows; else its whole query: `top_rows`). When every entry that changed
  between the two tags has a delta row to find it by (`delta_snapshots`: not after a
  rebuild, say), and the touched groups are at most `results_touched_share` of the
  view's groups (its count map's stored rows) for a table the driver writes (2 below:
  its Python then reads fewer entries than the whole view's), or of the table's rows
  for a MERGE (4, KEYED alone), which also needs `results_touched_min_rows` rows
  (below, a rewrite costs less);
- rewritten whole (`whole`) otherwise: a new view, a view recomputed at each close,
  with OFFSET, subqueries or rows not found by group, a table the driver writes from
  its own reads (1 below), a large share touched;
- neither (`unchanged`): when no map its rows are read from (ViewPlan.read_maps: not its
  derived relations', which feed them) has a delta row of those epochs,
  its entries at N are those at M, and so are its rows: the table's current snapshot is
  tagged epoch-N from the driver (one small PyIceberg commit), whatever the view's shape.

Who writes it, cheapest first (a Spark write and its tag are two commits and a job or
more, 0.3-0.9 s per table on 2 cores, and a MERGE about a second however few rows it
changes; a PyIceberg commit about 0.1 s):

1. the driver alone, for a table without delete files whose view's maps (read_maps)
   hold at most `results_driver_rows` rows at the tag (rewritten whole, however few
   groups an epoch touched: no Spark job at all): the driver's plan of maps.entries'
   files at the tag, each map's files read by Arrow, the read API's view semantics
   (`view_rows`, held equal to view_sql by tests/sqlreads/test_view_sql.py) make each
   view's rows, and one PyIceberg commit writes and tags the table
   (`cumulus.results-writer = driver`). The maps of values of a MIN/MAX without GROUP
   BY are not counted: Arrow cuts them to their extremes first (`extreme_domains`);
2. the driver too, for a touched update of any other table (group columns of string,
   boolean, integer, decimal or date types, and no timestamp column: `_driver_touches`)
   whose view's maps hold at most `results_driver_touched_rows` rows at the tag: the
   touched groups' keys from the delta rows' files (`_touched_keys`), each map's files
   read whole by Arrow and its rows of those groups kept, view_rows over them
   (`_touched_rows`). A table without delete files of at most `results_collect_rows`
   rows takes them with its rows of the other groups (read back and dropped as the
   MERGE's `<=>` matches them: `without_groups`), written and tagged in one PyIceberg
   commit: a copy of the table that its tag keeps, so the bound also bounds what an
   epoch adds to storage. A larger one (not a TOP) takes a row delta (`_commit_delta`,
   cumulus/store/rowdelta.py): its rows of those groups deleted by position, the new
   ones added, with the tag, in one commit through Iceberg's RowDelta in the driver's
   JVM;
3. Spark's query and the driver's commit, for such a table rewritten whole: Spark
   computes its rows, collected as Arrow, and the driver writes and tags them
   (`spark-collected`);
4. Spark alone otherwise: a MERGE of the touched groups' rows (Spark's query of them)
   of a view whose maps hold more than `results_driver_touched_rows`, a whole write,
   then ALTER TABLE's tag.

A new view's table is first created empty, its columns from Spark's analysis of the
view's SQL (`_create_empty`: a metadata commit, no job), so a small view's first rows
come from the driver too.

The driver's own rows (1, 2) are made first; then Spark's work, `table_workers` tables
at once; then the driver's commits of the rows of 2 and 3, one at a time (the driver's
writes in a thread of their own beside Spark measured slower: its Python holds the GIL
that py4j's calls wait for).

A marker table's property (`results._published`) records the epoch every table shows,
written after all of them: a crash between is mended by the next publish or close, and a
table already at `epoch-N` is left alone, so a retry writes nothing twice.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import TYPE_CHECKING

from cumulus.engine.results_rows import (
    KEYED,
    TOP,
    Touch,
    arrow_rows,
    extreme_domains,
    extremes_of,
    fitted_rows,
    of_groups,
    top_rows,
    touchable,
    without_groups,
)
from cumulus.faults import fault_point
from cumulus.parallel import for_each
from cumulus.spark.local import collected_arrow
from cumulus.sql.mapsql import Restriction, ViewGroups, quote, view_sql
from cumulus.sql.views import Compilation, ViewPlan, view_rows
from cumulus.store import commit
from cumulus.store.catalog import shared_catalog
from cumulus.store.home import load_home_schema
from cumulus.store.maps import COMPACTED_THROUGH, entries_scan, group_keys, read_entries
from cumulus.store.registry import live, registry
from cumulus.store.rowdelta import FILE, POS, commit_row_delta, live_rows
from cumulus.store.rows import scan_arrow
from cumulus.store.tables import MERGE_ON_READ_PROPERTIES, RESULTS, Home, tag_name

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("cumulus.results")

_DONE_THROUGH = "cumulus.results-epoch"  # the marker's property: the epoch every results table shows
UPDATE = "cumulus.results-update"  # commit summary of a results table: how it was written (touched | whole)
WRITER = "cumulus.results-writer"  # of a commit from the driver: who made its rows (else Spark wrote it)
DRIVER, COLLECTED = "driver", "spark-collected"  # the driver (view_rows over the maps), or Spark's query


def results_epoch(home: Home) -> int:
    """The epoch every results table was last written for (0: none yet; a very large
    number when the home keeps none, so nothing is ever due)."""
    if not home.settings.results_tables:
        return 1 << 62
    try:
        props = commit.table_metadata(home.spark, home.tables.results_marker).get("properties", {})
    except Exception:  # noqa: BLE001 - no marker yet
        return 0
    return int(props.get(_DONE_THROUGH, 0))


def delta_snapshots(meta: Mapping[str, object], since: int, epoch: int) -> list[tuple[int, int]] | None:
    """The snapshots of maps.entries that hold a delta row of every entry that changed
    from tag epoch-`since` to tag epoch-`epoch`, each with the epoch after which its rows
    are delta rows: the later tag's, and the parent of each compaction between them that
    compacted such rows (it dropped the entries they summed to zero). A snapshot's rows of
    an epoch a compaction since `since` went through are that compaction's sums, one row
    per entry however few changed, so it counts from the compaction's epoch on (its
    parent holds the delta rows). None when anything else came between (a rebuild, a
    rollback, an expired snapshot): then no delta row need show a change."""
    refs = meta.get("refs") or {}
    old, new = refs.get(tag_name(since)), refs.get(tag_name(epoch))
    if not old or not new:
        return None
    by_id = {snap["snapshot-id"]: snap for snap in meta.get("snapshots", [])}
    between: list[tuple[int, int | None]] = []  # newest first: (snapshot, the epoch it compacted through)
    for snap, summary in commit.ancestors(meta, new["snapshot-id"]):
        if snap == old["snapshot-id"]:
            break
        operation = summary.get("operation")
        if operation == "replace" or (operation == "append" and int(summary.get(commit.EPOCH, 0)) > since):
            between.append((snap, None))  # a file rewrite (no row changes), a later epoch's deltas
        elif COMPACTED_THROUGH in summary and commit.EPOCH not in summary:  # (a rebuild names its epoch)
            between.append((snap, int(summary[COMPACTED_THROUGH])))
        else:
            return None
    else:
        return None  # epoch-`since` is not an ancestor (expired, or another lineage)
    floor, parents = since, []
    for snap, through in reversed(between):  # oldest first
        parent = by_id[snap].get("parent-snapshot-id")
        if through is not None and through > floor:
            if parent is not None:
                parents.append((parent, floor))
            floor = through
    return [(new["snapshot-id"], floor), *reversed(parents)]


def _deltas(home: Home, maps: set[str], snapshots: list[tuple[int, int]]) -> DataFrame:
    """The delta rows of `maps` in the snapshots (delta_snapshots: each snapshot's rows of
    the epochs after its own), read once for every view (their files alone: a row's epoch
    prunes the rest). Each snapshot is read by the `snapshot-id` option, not `VERSION AS
    OF`: Spark 3.5 takes two time-travel reads of one table in a query for the same
    relation (Iceberg's table compares by name), and a DISTINCT over their UNION keeps one
    of them (measured: 1,000 keys instead of 1,569)."""
    from pyspark.sql import functions as F

    table = home.tables.maps
    parts = [home.spark.read.format("iceberg").option("snapshot-id", snap).load(table)
             .where(F.col("map").isin(sorted(maps)) & (F.col("epoch") > after)) for snap, after in snapshots]
    return reduce(lambda a, b: a.unionByName(b), parts)


def _changed_maps(home: Home, maps: set[str], snapshots: list[tuple[int, int]]) -> set[str]:
    """Those of `maps` with a delta row in the snapshots (delta_snapshots: each with the
    epoch after which its rows are delta rows), from the driver's plan of maps.entries'
    files, no row read: a file whose `epoch` bounds reach past the snapshot's epoch may
    hold one. Each file holds one epoch (an apply's deltas, a compaction's or a rebuild's
    sums), so the plan finds exactly the maps with such rows; a file of several would
    only make a map look changed, and its views' tables be rewritten, never the reverse."""
    from pyiceberg.expressions import And, GreaterThan, In

    table = shared_catalog(home.settings).load_table(home.tables.maps.pyiceberg)
    found: set[str] = set()
    for snap, after in snapshots:
        scan = table.scan(snapshot_id=snap, row_filter=And(In("map", sorted(maps)), GreaterThan("epoch", after)))
        found |= {task.file.partition[0] for task in scan.plan_files()}
    return found & maps


def _touched_keys(table, touches: Mapping[str, Touch], snapshots: list[tuple[int, int]]) -> dict[str, pa.Table]:
    """The keys (`__g<i>`) of the groups each view's maps' delta rows touched (as
    `_deltas` and `group_keys` find them through Spark), read by the driver from
    maps.entries (the PyIceberg `table`): one scan per snapshot of the delta rows' files
    (their `epoch` bounds prune the rest) and Arrow's distinct per view, no Spark job."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import And, GreaterThan, In

    maps = sorted({m for t in touches.values() for m in t.groups[1]})
    slots = sorted({slot for t in touches.values() for pairs in t.groups[1].values() for slot, _ in pairs})
    deltas = pa.concat_tables([scan_arrow(table.scan(snapshot_id=snap, selected_fields=("map", *slots),
                                                     row_filter=And(In("map", maps), GreaterThan("epoch", after))))
                               for snap, after in snapshots], promote_options="permissive")
    by_map = {m: deltas.filter(pc.equal(deltas.column("map"), m)) for m in maps}
    found = {}
    for view, touch in touches.items():
        parts = [pa.table({f"__g{i}": by_map[name].column(slot) for slot, i in sorted(pairs, key=lambda p: p[1])})
                 for name, pairs in touch.groups[1].items()]
        keys = pa.concat_tables(parts, promote_options="permissive")
        found[view] = keys.group_by(keys.column_names).aggregate([])
    return found


def _no_deletes(meta: Mapping[str, object] | None) -> bool:
    """Whether a results table is there and its current snapshot has no delete file (a
    MERGE writes position deletes; PyIceberg's whole rewrite would leave them behind); a
    table just created has no snapshot, and so none."""
    if meta is None:
        return False
    summary = next(iter(commit.summaries_back(meta)), {})
    return not int(summary.get("total-delete-files", 0))


# Iceberg types of a group column the driver finds a table's rows by as Spark's `<=>`
# does (results_rows._filler: not a float's, whose NaN and -0.0 Spark's equality treats
# its own way, nor a timestamp's).
_DRIVER_GROUP_TYPES = ("string", "boolean", "int", "long", "date", "decimal")


def _driver_touches(meta: Mapping[str, object], outputs: tuple[str, ...]) -> bool:
    """Whether the driver can update a results table by its groups `outputs` (a view's
    group columns): each of a type it finds rows by, and no timestamp column (arrow_rows
    refuses a naive datetime). Else Spark's MERGE or a whole write, chosen up front."""
    schema = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
    types = {f["name"]: f["type"] if isinstance(f["type"], str) else "" for f in schema["fields"]}
    return (not any(t.startswith("timestamp") for t in types.values())
            and all(types.get(o, "").startswith(_DRIVER_GROUP_TYPES) for o in outputs))


def _unpartitioned(meta: Mapping[str, object]) -> bool:
    """Whether a results table's default partition spec has no field (a user may have
    partitioned it: the driver's row delta places no file by partition)."""
    spec = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
    return not spec["fields"]


def _live_rows(meta: Mapping[str, object]) -> int:
    summary = next(iter(commit.summaries_back(meta)), {})
    return int(summary.get("total-records", 0)) - int(summary.get("total-position-deletes", 0))


def _tag_snapshot(meta: Mapping[str, object], epoch: int) -> int | None:
    return ((meta.get("refs") or {}).get(tag_name(epoch)) or {}).get("snapshot-id")


def shows_epoch(meta: Mapping[str, object], epoch: int) -> bool:
    """Whether a results table's current snapshot holds the rows of its tag epoch-N: it
    is that snapshot, or follows it by file rewrites alone (maintenance's compaction)."""
    tagged = _tag_snapshot(meta, epoch)
    return tagged is not None and commit.descends_by(meta, tagged, frozenset({"replace"}))


def _merge(spark: SparkSession, table: str, keys: str, rows: DataFrame, outputs: tuple[str, ...]) -> None:
    """Replace the rows of the groups in the temporary view `keys` in `table` by `rows`
    (the view's rows of those groups, registered as the temporary view `<keys>_rows`; a
    group without one is deleted), in one commit."""
    rows.createOrReplaceTempView(f"{keys}_rows")
    name = f"`{keys}_rows`"
    on = " AND ".join(f"n.{quote(c)} <=> k.`__g{i}`" for i, c in enumerate(outputs))
    columns = [quote(c) for c in rows.columns]
    key = " AND ".join(f"t.{quote(c)} <=> s.`__g{i}`" for i, c in enumerate(outputs))
    spark.sql(f"""
        MERGE INTO {table} t
        USING (SELECT k.*, n.* FROM `{keys}` k
               LEFT JOIN (SELECT *, TRUE AS `__present` FROM {name}) n ON {on}) s
        ON {key}
        WHEN MATCHED AND s.`__present` THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in columns)}
        WHEN MATCHED THEN DELETE
        WHEN NOT MATCHED AND s.`__present` THEN INSERT ({', '.join(columns)}) VALUES ({', '.join(f's.{c}' for c in columns)})
    """)


@dataclass
class _Written:
    """How one view's results table was written, and where its time went."""

    how: str  # touched | whole | unchanged | kept
    groups: int = 0  # touched groups
    seconds: dict[str, float] = field(default_factory=dict)  # merge, whole, driver, collect
    rows: pa.Table | None = None  # rows for the driver to write: every row (Spark's), or the touched groups' (its own)
    keys: pa.Table | None = None  # ... and of a touched update, those groups' keys (`__g<i>`)
    touch: Touch | None = None  # ... and how they make the table's rows
    writer: str = COLLECTED  # who made those rows: Spark's query, or the driver (_touched_rows)
    delta: bool = False  # ... written as a row delta (_commit_delta), not with the table's other rows


def _create_empty(home: Home, compiled: Compilation, views: list[str], epoch: int) -> None:
    """Create the results tables of `views` (none there yet) empty, with the columns and
    types Spark's analysis of each view's SQL gives (what a Spark write of its rows would
    create): a metadata commit each, no job, so that the driver may write a small view's
    first rows as it writes its later ones (a Spark write of a new table and its tag cost
    1-2 s per view on 2 cores, a PyIceberg commit about 0.1 s). A crash before the rows
    leaves an empty table that shows no epoch: the retry writes it."""
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in {"format-version": "2", **MERGE_ON_READ_PROPERTIES}.items())
    for view in views:
        frame = home.spark.sql(view_sql(compiled, view, epoch, catalog=home.catalog, order=False))
        # Every column nullable, as Iceberg's Spark writer makes a table from a frame
        # (StructType.asNullable, then toDDL: names quoted, types as Spark prints them).
        columns = frame._jdf.schema().asNullable().toDDL()
        home.spark.sql(f"CREATE TABLE IF NOT EXISTS {home.tables.results(view)} ({columns}) USING iceberg "
                       f"TBLPROPERTIES ({properties})")


def _metadata(home: Home, view: str) -> Mapping[str, object] | None:
    """results.<view>'s metadata (None: no table yet)."""
    table = home.tables.results(view)
    return commit.table_metadata(home.spark, table) if home.spark.catalog.tableExists(table) else None


def _by_touched(home: Home, meta: Mapping[str, object], touch: Touch, count: int, by_driver: bool,
                groups: int) -> bool:
    """Whether results.<view> is updated by the `count` groups the epochs since the one it
    shows touched (module doc), rather than rewritten whole. Of a table the driver updates
    (`by_driver`), when they are at most `results_touched_share` of the view's `groups`
    (its count map's stored rows: the driver's Python then goes over fewer entries than
    the whole view's); of another (a MERGE, KEYED views alone), when the table has at
    least `results_touched_min_rows` rows of which they are at most that share."""
    settings = home.settings
    if by_driver:
        return count <= settings.results_touched_share * groups
    rows = _live_rows(meta)
    return (touch.shape == KEYED and rows >= settings.results_touched_min_rows
            and count <= settings.results_touched_share * rows)


def _write_view(home: Home, compiled: Compilation, view: str, epoch: int, meta: Mapping[str, object] | None,
                touch: Touch | None = None, deltas: DataFrame | None = None, count: int = 0,
                collect: bool = False) -> _Written:
    """Bring results.<view> to `epoch` through Spark (module doc) and tag it: by a MERGE
    of its touched groups (`touch`: how its rows are found by group; `count` groups have
    delta rows in `deltas`), else rewritten whole. `collect`: Spark's query of every row
    only, its rows returned for the driver to write and tag (`_commit_collected`)."""
    from pyspark.sql import functions as F

    table = home.tables.results(view)
    if touch is not None:
        written = _merge_touched(home, compiled, view, touch, deltas, count, epoch)
    elif collect:
        started = time.perf_counter()
        rows = collected_arrow(home.spark.sql(view_sql(compiled, view, epoch, catalog=home.catalog, order=False)))
        return _Written("whole", seconds={"collect": time.perf_counter() - started}, rows=rows)
    else:
        started = time.perf_counter()
        frame = home.spark.sql(view_sql(compiled, view, epoch, catalog=home.catalog, order=False))
        writer = frame.writeTo(table).options(**commit.write_options({UPDATE: "whole", commit.EPOCH: epoch}))
        if meta is not None and home.spark.table(table).schema == frame.schema:
            writer.overwrite(F.lit(True))
        else:  # a new view, or one dropped and added again with other columns
            writer = writer.tableProperty("format-version", "2")
            for name, value in MERGE_ON_READ_PROPERTIES.items():  # later MERGEs write deletes, not files
                writer = writer.tableProperty(name, value)
            writer.createOrReplace()
        written = _Written("whole", seconds={"whole": time.perf_counter() - started})
    home.spark.sql(f"ALTER TABLE {table} CREATE OR REPLACE TAG `{tag_name(epoch)}`")
    return written


def _merge_touched(home: Home, compiled: Compilation, view: str, touch: Touch,
                   deltas: DataFrame, count: int, epoch: int) -> _Written:
    """Update results.<view> (a KEYED view's) by a MERGE of the `count` groups whose
    entries have delta rows in `deltas`: their rows by Spark's query of those groups."""
    outputs, slots = touch.groups
    started = time.perf_counter()
    keys = group_keys(deltas, slots).cache()
    try:
        name = f"__touched_{abs(hash(view)):x}"  # a temporary view of this view's (several run at once)
        keys.createOrReplaceTempView(name)
        restriction = Restriction(f"`{name}`", slots)
        rows = home.spark.sql(view_sql(compiled, view, epoch, catalog=home.catalog, order=False, groups=restriction))
        with commit.commit_properties(home.spark, {UPDATE: "touched", commit.EPOCH: epoch}):
            _merge(home.spark, home.tables.results(view), name, rows, outputs)
        home.spark.catalog.dropTempView(f"{name}_rows")
        home.spark.catalog.dropTempView(name)
    finally:
        keys.unpersist()
    return _Written("touched", count, {"merge": time.perf_counter() - started})


def _commit_collected(home: Home, compiled: Compilation, view: str, written: _Written, epoch: int) -> bool:
    """Write and tag from the driver, in one PyIceberg commit, the rows of results.<view>
    in `written`: every row, by Spark's query (_write_view), or the rows of the touched
    groups, by the driver (_touched_rows), with the table's rows of the other groups
    (read back; of a TOP view, the first of them all: top_rows). False (nothing written,
    logged) when they do not fit its columns as they are, or a TOP view's first rows are
    not among them."""
    import pyarrow as pa

    table = shared_catalog(home.settings).load_table(home.tables.results(view).pyiceberg)
    schema = table.schema().as_arrow()
    rows = fitted_rows(schema, view, compiled.views[view], written.rows)
    if rows is not None and written.touch is not None:
        current = table.scan().to_arrow().cast(schema)
        kept = without_groups(current, written.touch.groups[0], written.keys, view)
        if kept is None:
            rows = None
        elif written.touch.shape == TOP:
            rows = top_rows(written.touch, current, pa.concat_tables([kept, rows]), view)
        else:
            rows = pa.concat_tables([kept, rows])
    if rows is None:
        return False
    _commit(table, rows, epoch, written.how, written.writer)
    return True


def _commit_delta(home: Home, compiled: Compilation, view: str, written: _Written, epoch: int) -> bool:
    """Update results.<view> by the rows of its touched groups in `written` (the driver's,
    _touched_rows) and tag it, in one commit from the driver (cumulus/store/rowdelta.py):
    the table's live rows of those groups (found as the MERGE's `<=>` finds them:
    of_groups over their group columns, read with their positions) deleted by position,
    the new rows added. False (nothing written, logged) when the groups cannot be found
    that way."""
    table = shared_catalog(home.settings).load_table(home.tables.results(view).pyiceberg)
    outputs = written.touch.groups[0]  # type: ignore[union-attr]
    rows = fitted_rows(table.schema().as_arrow(), view, compiled.views[view], written.rows)
    live = live_rows(table, outputs)
    doomed = None if rows is None else of_groups(live.rows, outputs, written.keys, view)
    if doomed is None:
        return False
    if rows.num_rows or doomed.num_rows:
        properties = {UPDATE: written.how, WRITER: written.writer, commit.EPOCH: str(epoch)}
        commit_row_delta(home.spark, home.tables.results(view), table, rows, doomed.select([FILE, POS]), live,
                         properties, tag_name(epoch))
    else:  # the groups had no rows, and have none
        table.manage_snapshots().create_tag(live.snapshot, tag_name(epoch)).commit()
    return True


@dataclass
class _Stored:
    """One plan of maps.entries' files at tag epoch-N, of the maps of the views due (none
    of their rows read): each map's stored rows (at least its entries, maps.entries being
    partitioned by map), and the scan and files to read some of them by."""

    scan: object
    tasks: list
    rows: Counter[str]

    @classmethod
    def plan(cls, home: Home, compiled: Compilation, views: list[str], epoch: int) -> _Stored | None:
        maps = shared_catalog(home.settings).load_table(home.tables.maps.pyiceberg)
        tagged = maps.snapshot_by_name(tag_name(epoch))
        if tagged is None or not views:
            return None
        scan = entries_scan(maps, tagged.snapshot_id,
                            {m: compiled.checked.maps[m] for v in views for m in compiled.views[v].read_maps})
        tasks = list(scan.plan_files())
        rows: Counter[str] = Counter()
        for task in tasks:
            rows[task.file.partition[0]] += task.file.record_count
        return cls(scan, tasks, rows)

    def of(self, plan: ViewPlan, but: Collection[str] = ()) -> int:
        """The stored rows of every map a view reads (`but` these)."""
        return sum(self.rows[m] for m in plan.read_maps if m not in but)


def _from_driver(home: Home, compiled: Compilation, views: list[str], epoch: int,
                 stored: _Stored | None, extremes: Mapping[str, frozenset]) -> dict[str, _Written]:
    """Rewrite from the driver (module doc) the results tables of `views` (rewritten whole,
    their tables there without delete files, their maps holding at most
    `results_driver_rows` rows at tag epoch-N: `stored`, but for the maps of values of
    their MIN and MAX without GROUP BY, `extremes`, whose rows Arrow cuts to the extremes
    first: extremes_of), each table with its tag in one PyIceberg commit. A view whose
    rows do not fit its table's columns as they are is left out (logged): Spark writes it."""
    if not views or stored is None:
        return {}
    started = time.perf_counter()
    plans = {v: compiled.views[v] for v in views}
    needed = {m: compiled.checked.maps[m] for p in plans.values() for m in p.read_maps}

    def keep(name: str, rows: pa.Table) -> pa.Table:
        return extremes_of(rows, needed[name], extremes[name]) if name in extremes else rows

    entries = read_entries(stored.scan, needed, [t for t in stored.tasks if t.file.partition[0] in needed], keep)
    written: dict[str, _Written] = {}
    for view, plan in plans.items():
        if _commit_rows(home, view, plan, view_rows(plan, entries), epoch):
            written[view] = _Written("whole", seconds={"driver": 0.0})
    if written:  # the batch's time, counted once
        next(iter(written.values())).seconds["driver"] = time.perf_counter() - started
    return written


class _NotFromDriver(Exception):
    """A view's touched groups cannot be found by the driver: Spark writes its table."""


def _touched_rows(home: Home, compiled: Compilation, touches: Mapping[str, Touch], keys: Mapping[str, pa.Table],
                  stored: _Stored, epoch: int) -> dict[str, _Written]:
    """The rows of the groups the epochs touched (`keys`, by view) of views whose tables
    the driver writes, made by the driver as Spark's touched query makes them: each map
    the view reads at tag epoch-N (`stored`), its files read whole by Arrow and the rows
    of those groups kept (of_groups), view_rows over them (of a TOP view, before its
    LIMIT: top_rows ranks them). No Spark job: Spark's query of a view's touched groups
    took 1.2-2.6 s alone for the corpus's three such tables at SF 1 (reading maps of 0.2-3
    million rows), the driver's 0.1-0.4 s. The driver writes them as it writes Spark's
    rows (_commit_collected). A view whose keys or rows do not fit its table is left out
    (logged): Spark writes it whole."""
    written: dict[str, _Written] = {}
    catalog = shared_catalog(home.settings)
    for view, touch in touches.items():
        started = time.perf_counter()
        plan, slots = compiled.views[view], touch.groups[1]

        def keep(name: str, rows: pa.Table, view: str = view, slots: dict = slots) -> pa.Table:
            pairs = sorted(slots[name], key=lambda pair: pair[1])
            kept = of_groups(rows, tuple(slot for slot, _ in pairs), keys[view], view)
            if kept is None:
                raise _NotFromDriver(view)
            return kept

        needed = {m: compiled.checked.maps[m] for m in plan.read_maps}
        entries = read_entries(stored.scan, needed, [t for t in stored.tasks if t.file.partition[0] in needed], keep)
        unlimited = plan if touch.shape != TOP else replace(plan, finish=replace(plan.finish, limit=None))
        try:
            rows = view_rows(unlimited, entries)
        except _NotFromDriver:
            continue
        schema = catalog.load_table(home.tables.results(view).pyiceberg).schema().as_arrow()
        arrow = arrow_rows(schema, view, plan, rows)
        if arrow is not None:
            written[view] = _Written("touched", keys[view].num_rows, {"driver": time.perf_counter() - started},
                                     rows=arrow, keys=keys[view], touch=touch, writer=DRIVER)
    return written


def _tag_unchanged(home: Home, views: list[str], epoch: int) -> dict[str, _Written]:
    """Tag epoch-N on the current snapshot of each view's results table (their rows did not
    change: write_results), one PyIceberg commit each from the driver."""
    started = time.perf_counter()
    catalog = shared_catalog(home.settings)
    written = {}
    for view in views:
        table = catalog.load_table(home.tables.results(view).pyiceberg)
        table.manage_snapshots().create_tag(table.metadata.current_snapshot_id, tag_name(epoch)).commit()
        written[view] = _Written("unchanged")
    if written:  # the batch's time, counted once
        next(iter(written.values())).seconds["tag"] = time.perf_counter() - started
    return written


def _commit_rows(home: Home, view: str, plan: ViewPlan, rows: list[tuple], epoch: int) -> bool:
    """Rewrite results.<view> whole with `rows` (the view's rows at tag epoch-N, from
    view_rows) and tag it, in one PyIceberg commit from the driver; False (nothing
    written, logged) when the rows do not fit the table's columns as they are."""
    table = shared_catalog(home.settings).load_table(home.tables.results(view).pyiceberg)
    arrow = arrow_rows(table.schema().as_arrow(), view, plan, rows)
    if arrow is None:
        return False
    _commit(table, arrow, epoch, "whole", DRIVER)
    return True


def _commit(table, rows: pa.Table, epoch: int, how: str, writer: str) -> None:
    """Replace every row of the PyIceberg `table` by `rows` and tag it epoch-N, in one commit."""
    from pyiceberg.table.update.snapshot import ManageSnapshots

    with warnings.catch_warnings(), table.transaction() as tx:
        warnings.simplefilter("ignore")  # (a whole rewrite drops files: no merge-on-read delete to warn of)
        tx.overwrite(rows, snapshot_properties={UPDATE: how, WRITER: writer, commit.EPOCH: str(epoch)})
        ManageSnapshots(tx).create_tag(tx.table_metadata.current_snapshot_id, tag_name(epoch)).commit()


def _touched_counts(deltas: DataFrame, groups: Mapping[str, ViewGroups]) -> dict[str, int]:
    """How many groups of each view (by name) have delta rows in `deltas`, found by one
    pass over them: each delta row becomes the (view, group key) of every view reading
    its map, and one DISTINCT counts them. (A job per view cost 4.7 s summed for the 51
    views of the corpus at SF 0.1; a union of per-view DISTINCTs in one job, 8.8 s.)"""
    from pyspark.sql import functions as F

    readers: dict[str, list[tuple[str, tuple[tuple[str, int], ...]]]] = {}  # map -> (view, its slots)
    for view, (_, slots) in groups.items():
        for name, pairs in slots.items():
            readers.setdefault(name, []).append((view, pairs))

    def keyed(view: str, pairs: tuple[tuple[str, int], ...]) -> Column:
        key = F.to_json(F.struct(*(F.col(slot).alias(f"__g{i}") for slot, i in pairs)))  # (a NULL key is a key)
        return F.struct(F.lit(view).alias("view"), key.alias("key"))

    cases = None
    for name, views in readers.items():
        rows = F.array(*(keyed(view, pairs) for view, pairs in views))
        cases = (F.when if cases is None else cases.when)(F.col("map") == name, rows)
    keys = deltas.where(F.col("map").isin(list(readers))).select(F.explode(cases).alias("k")).select("k.*")
    found = {r["view"]: r["n"] for r in keys.distinct().groupBy("view").agg(F.count(F.lit(1)).alias("n")).collect()}
    return {view: int(found.get(view, 0)) for view in groups}


def write_results(home: Home, epoch: int, *, mode: str = "auto") -> dict[str, str]:
    """Bring every registered view's results.<view> to epoch `epoch` (module doc) and tag
    it; then the marker. Views added after the epoch are left for a later one. `mode`:
    "auto" (touched groups where they are cheaper), or "whole" (every table rewritten:
    the bench's other measure). Returns how each view's table was written: "touched",
    "whole", "unchanged" (tagged as it was) or "kept" (already at the epoch). Idempotent."""

    from cumulus.engine.registry import compile_registered

    if not home.settings.results_tables:
        return {}
    started = time.perf_counter()
    rows = registry(home.spark, home.settings)
    due = [v for v in live(rows) if (v.added_epoch or 0) <= epoch]
    compiled = compile_registered(load_home_schema(home.settings), rows, home.settings.sql_dialect)
    due = [v.name for v in due if v.name in compiled.views]
    since = results_epoch(home)
    snapshots = None
    if mode == "auto" and 0 < since < epoch:
        snapshots = delta_snapshots(commit.table_metadata(home.spark, home.tables.maps), since, epoch)
    home.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {home.catalog}.{RESULTS}")
    metas = {v: _metadata(home, v) for v in due}
    if mode == "auto" and (new := [v for v, meta in metas.items() if meta is None]):
        _create_empty(home, compiled, new, epoch)
        metas |= {v: _metadata(home, v) for v in new}
    settings = home.settings
    done = {v: _Written("kept") for v, meta in metas.items()  # a retry after a crash: these were written
            if meta is not None and mode == "auto" and shows_epoch(meta, epoch)}
    changed = None
    if snapshots is not None and due:  # no delta row in any of its maps: the view's rows are the last epoch's
        changed = _changed_maps(home, {m for v in due for m in compiled.views[v].read_maps}, snapshots)
        done |= _tag_unchanged(home, [v for v in due if v not in done and metas[v] is not None
                                      and not changed & set(compiled.views[v].read_maps)
                                      and shows_epoch(metas[v], since)], epoch)
    # Small views whose tables are there without delete files: from the driver, first (a
    # thread of its own beside Spark's writes measured slower: its Python holds the GIL
    # that py4j's calls wait for). Rows that do not fit their table: through Spark.
    stored = _Stored.plan(home, compiled, [v for v in due if v not in done], epoch) if mode == "auto" else None
    candidates = [v for v in due if v not in done and _no_deletes(metas[v])]
    extremes = extreme_domains([compiled.views[v] for v in candidates], compiled.checked.maps)
    done |= _from_driver(home, compiled, [v for v in candidates if stored and 0 < settings.results_driver_rows
                                          >= stored.of(compiled.views[v], but=extremes)
                                          and stored.of(compiled.views[v]) <= settings.results_driver_touched_rows],
                         epoch, stored, extremes)

    def collects(view: str, touch: Touch | None = None) -> bool:  # the driver writes it (module doc: 2, 3)
        meta = metas[view]
        return (mode == "auto" and _no_deletes(meta) and _live_rows(meta) <= settings.results_collect_rows
                and (touch is None or _driver_touches(meta, touch.groups[0])))

    def drives(view: str, touch: Touch) -> bool:  # the driver updates it by touched groups (module doc: 2)
        return bool(mode == "auto" and stored and stored.of(compiled.views[view]) <= settings.results_driver_touched_rows
                    and (collects(view, touch) or deltas_of(view, touch)))

    def deltas_of(view: str, touch: Touch) -> bool:  # ... by a row delta (module doc: 2)
        return (not collects(view, touch) and touch.shape != TOP and metas[view] is not None
                and _driver_touches(metas[view], touch.groups[0]) and _unpartitioned(metas[view]))

    # The views a touched update may suit (rows found by group, a changed map, a table
    # showing `since`, the driver's to write or MERGE's) and how many groups of each the
    # epochs touched: of a table the driver writes, their keys read by the driver
    # (_touched_keys); of a MERGE's, the delta rows of their maps read once by Spark.
    deltas, touches, touched, keys, keys_s = None, {}, {}, {}, 0.0
    if changed is not None:
        started_keys = time.perf_counter()
        for view in due:
            touch = touchable(compiled.views[view], compiled.checked.maps) if view not in done else None
            if (touch is not None and changed & set(touch.groups[1]) and shows_epoch(metas[view], since)
                    and (drives(view, touch) or touch.shape == KEYED)):
                touches[view] = touch
        by_driver = {v: t for v, t in touches.items() if drives(v, t)}
        if by_driver:
            keys = _touched_keys(shared_catalog(settings).load_table(home.tables.maps.pyiceberg), by_driver, snapshots)
            touched = {v: k.num_rows for v, k in keys.items()}
        if merged := {v: t for v, t in touches.items() if v not in by_driver}:
            deltas = _deltas(home, {m for t in merged.values() for m in t.groups[1]}, snapshots).cache()
            touched |= _touched_counts(deltas, {v: t.groups for v, t in merged.items()})
        touches = {v: t for v, t in touches.items() if touched[v] and _by_touched(
            home, metas[v], t, touched[v], v in by_driver, stored.rows[compiled.views[v].count.map] if stored else 0)}
        keys_s = time.perf_counter() - started_keys
    try:
        # The driver's rows of the touched groups of the tables it writes (a view whose rows
        # it cannot make: Spark's whole query)
        done |= _touched_rows(home, compiled, {v: t for v, t in touches.items() if v in keys}, keys, stored, epoch)
        for view, touch in touches.items():
            if view in keys and view in done:
                done[view].delta = deltas_of(view, touch)
        touches = {v: t for v, t in touches.items() if v not in keys}
        # Then Spark, table_workers tables at once; of a table the driver can write (no
        # delete files, at most results_collect_rows rows), Spark's query alone: the driver
        # writes and tags it after them.
        def write(view: str) -> _Written:
            touch = touches.get(view)
            return _write_view(home, compiled, view, epoch, metas[view], touch, deltas, touched.get(view, 0),
                               collects(view, touch))

        done |= for_each(write, [v for v in due if v not in done], settings.table_workers,
                         f"epoch {epoch} results")
        for view, w in done.items():  # the driver's commits one at a time: one writer of the catalog at once
            if w.rows is None:
                continue
            started_commit = time.perf_counter()
            if (_commit_delta if w.delta else _commit_collected)(home, compiled, view, w, epoch):
                w.seconds["driver" if w.writer == DRIVER else "collect"] += time.perf_counter() - started_commit
                w.rows = w.keys = None
            else:  # through Spark, whole, after all
                done[view] = _write_view(home, compiled, view, epoch, metas[view])
    finally:
        if deltas is not None:
            deltas.unpersist()
    how = {view: w.how for view, w in done.items()}
    _log_slowest(epoch, done)
    seconds: Counter[str] = Counter({"keys": keys_s})
    for w in done.values():
        seconds.update(w.seconds)
    touched_rows = sum(w.groups for w in done.values())
    fault_point("publish.after-results")
    marker = home.tables.results_marker
    home.spark.sql(f"CREATE TABLE IF NOT EXISTS {marker} (epoch BIGINT) USING iceberg")
    home.spark.sql(f"ALTER TABLE {marker} SET TBLPROPERTIES ('{_DONE_THROUGH}' = '{epoch}')")
    counts = {m: sum(v == m for v in how.values()) for m in ("touched", "whole", "unchanged", "kept")}
    seconds["total"] = time.perf_counter() - started

    def tables(kind: str, part: str) -> int:  # how many tables of a kind had a part
        return sum(w.how == kind and part in w.seconds for w in done.values())

    log.info("epoch %d: results of %d views in %.1f s: %d by %d touched groups (keys %.1f s; %d by a MERGE, %d from "
             "the driver's rows), %d rewritten whole (%d by Spark, %d from the driver's rows, %d "
             "from Spark's); MERGEs %.1f s, whole by Spark %.1f s, the driver's rows %.1f s, Spark's rows written "
             "from the driver %.1f s; %d unchanged (tagged in %.1f s); %d kept", epoch,
             len(how), seconds["total"], counts["touched"], touched_rows, seconds["keys"], tables("touched", "merge"),
             tables("touched", "driver"), counts["whole"], tables("whole", "whole"),
             tables("whole", "driver"), tables("whole", "collect"), seconds["merge"], seconds["whole"],
             seconds["driver"], seconds["collect"], counts["unchanged"], seconds["tag"], counts["kept"],
             extra={"results_seconds": dict(seconds)})
    return how


def _log_slowest(epoch: int, done: Mapping[str, _Written], shown: int = 6) -> None:
    """Log the tables that took longest, each with how it was written and where its time
    went (a batch's time is counted on its first table: _from_driver, _tag_unchanged)."""
    timed = sorted(((sum(w.seconds.values()), v, w) for v, w in done.items() if w.seconds), reverse=True)
    if timed:
        log.info("epoch %d: results' slowest tables: %s", epoch, "; ".join(
            f"{v} {total:.1f} s ({w.how}: " + ", ".join(f"{k} {s:.1f}" for k, s in w.seconds.items()) + ")"
            for total, v, w in timed[:shown]))


def results_updates(home: Home, epoch: int) -> dict[str, str]:
    """How each results table came to tag epoch-N: "touched" or "whole" (its commit's
    summary), "unchanged" (none of its rows changed: the tag is the earlier epoch's
    snapshot); views without a table at that tag are left out."""
    found = {}
    for view in live(registry(home.spark, home.settings)):
        table = home.tables.results(view.name)
        if not home.spark.catalog.tableExists(table):
            continue
        meta = commit.table_metadata(home.spark, table)
        snap = _tag_snapshot(meta, epoch)
        if snap is None:
            continue
        _, summary = next(commit.ancestors(meta, snap))
        found[view.name] = summary.get(UPDATE, "whole") if summary.get(commit.EPOCH) == str(epoch) else "unchanged"
    return found
