"""The derived relations' step of a close (and of a rebuild or back-fill): the change of
every derived relation (a nested query, cumulus/sql/nested.py) since the state its
readers last saw, as events, applied through their triggers in one commit.

A derived relation's rows are its view's rows (cumulus/sql/mapsql.py: plan_sql) over the
maps. Its events are the rows over the state after the epoch's base events minus the rows
over the state before them (`diff`: deletes of old rows, inserts of new rows; a group the
epoch did not touch has the same row on both sides and gives none). Where its rows are one
per group, each a function of its group's entries (sql/mapsql.py: view_groups), both sides
are read for the groups whose entries the epoch's delta rows touched, not for every group.
They are evaluated with the state after the base events (and after the derived relations
before them), which is the serial result of the base events followed by the derived ones
(cumulus/sql/derived.py says why it is exact). The close runs this after every apply and
repair of the epoch, before the fold, as one commit marked `derived-N`: a retry finds the
commit and does nothing."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
from typing import TYPE_CHECKING

from cumulus.engine.apply import (
    ApplyRecord,
    batch_commit,
    delta_names,
    driver_frame,
    record_written,
    save_record,
    write_deltas,
)
from cumulus.engine.driver_apply import BY_SPARK, IN_DRIVER, driver_derived
from cumulus.engine.evaluate import (
    BatchPlan,
    counted,
    evaluate_batch,
    union_all,
    without_statistics,
)
from cumulus.parallel import for_each
from cumulus.sql.mapsql import Restriction, plan_sql, view_groups
from cumulus.store.commit import table_metadata, total_records
from cumulus.store.maps import COMPACTED_SOURCE, group_keys, summed, unversioned
from cumulus.store.tables import Home

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("cumulus.derived")

_VIEWS = itertools.count(1)
DERIVED = "derived"  # the kind of a close's derived-relations commit in cumulus.applies
# A close's derived step materializes the maps' state once where maps.entries holds at
# most this many rows (a test home: 34 s less for tests/engine/test_full_refresh.py's
# epochs); above, each relation reads its maps' partitions where it uses them.
MATERIALIZED_STATE_ROWS = 1_000_000


def relation_rows(plan: BatchPlan, name: str, state: DataFrame, groups: Restriction | None = None) -> DataFrame:
    """The rows of derived relation `name` over `state` (rows shaped as maps.entries'),
    typed as its columns, with `op`: each row's multiplicity (its part's sign: UNION ALL's
    parts add, an anti-join's take away); `groups`: those of the groups it lists only."""
    from pyspark.sql import functions as F

    spark = state.sparkSession
    temp = f"__cumulus_state_{next(_VIEWS)}"
    state.createOrReplaceTempView(temp)
    relation = plan.checked.schema.relation(name)
    view = plan.derived[name]
    parts = []
    for sign, part in ((1, view), *view.others):
        rows = spark.sql(plan_sql(plan.maps, part, temp, groups)).toDF(*relation.column_names)
        parts.append(rows.selectExpr(*(f"CAST(`{c.name}` AS {c.sql_type}) AS `{c.name}`" for c in relation.columns))
                     .withColumn("op", F.lit(sign)))
    # The frames hold the analyzed plans: the name can go (a warm engine would otherwise
    # keep every epoch's state alive under it).
    spark.catalog.dropTempView(temp)
    return union_all(parts)


def diff(old: DataFrame, new: DataFrame) -> DataFrame:
    """Events (the columns and `op`, a signed multiplicity) turning the signed rows `old`
    into `new` (each with its multiplicity `op`)."""
    from pyspark.sql import functions as F

    columns = [c for c in old.columns if c != "op"]
    both = old.withColumn("op", -F.col("op")).unionByName(new)
    return both.groupBy(*columns).agg(F.sum("op").cast("int").alias("op")).where(F.col("op") != 0)


def rounds(plan: BatchPlan) -> list[list[str]]:
    """The derived relations (those with triggers) in rounds, each after every earlier
    relation whose triggers write a map that its view or its triggers read; the relations
    of one round read nothing the others write, so they are evaluated at once, each with
    the state after the earlier rounds, and give what the plan's order one at a time
    gives (their deltas add)."""
    names = [n for n in plan.derived if plan.statements.get(n)]
    writes = {n: {bs.statement.target.name for bs in plan.statements[n]} for n in names}
    reads = {n: {*plan.derived[n].maps, *plan.reads.get(n, ())} for n in names}
    level: dict[str, int] = {}
    for i, name in enumerate(names):
        level[name] = max((level[m] + 1 for m in names[:i] if writes[m] & reads[name]), default=0)
    return [[n for n in names if level[n] == r] for r in range(max(level.values(), default=-1) + 1)]


def _relation_deltas(plan: BatchPlan, name: str, before: DataFrame, state: DataFrame,
                     changes: DataFrame | None) -> DataFrame | None:
    """The deltas of every map from derived relation `name`'s change between `before` and
    `state` (materialized; None when none), compared over the groups `changes` touched
    where its rows are one per group (derived_deltas)."""
    started = time.perf_counter()
    groups = view_groups(plan.derived[name], plan.maps) if changes is not None else None
    restriction, how = None, "compared whole"
    if groups is not None:
        keys, touched = counted(group_keys(changes, groups[1]))
        if not touched:
            log.debug("derived relation %s: no group touched (%.1f s)", name, time.perf_counter() - started)
            return None  # no entry of its maps changed: neither did its rows
        keys_view, how = f"__cumulus_keys_{next(_VIEWS)}", f"{touched} group(s) touched"
        keys.createOrReplaceTempView(keys_view)
        restriction = Restriction(f"`{keys_view}`", groups[1])
    events, changed = counted(diff(relation_rows(plan, name, before, restriction),
                                   relation_rows(plan, name, state, restriction)))
    if restriction is not None:
        state.sparkSession.catalog.dropTempView(keys_view)
    compared = time.perf_counter()
    if not changed:
        log.debug("derived relation %s: %s, no row changed (%.1f s)", name, how, compared - started)
        return None
    only = BatchPlan((name,), plan.statements, plan.params, plan.checked, plan.derived)
    deltas = evaluate_batch(only, {name: events}, state)
    written = 0
    if deltas is not None:
        deltas, written = counted(deltas)
    log.debug("derived relation %s: %s, %d row(s) changed (%.1f s), %d delta row(s) (%.1f s)", name, how, changed,
              compared - started, written, time.perf_counter() - compared)
    return deltas if written else None


def derived_deltas(plan: BatchPlan, before: DataFrame, after: DataFrame,
                   changed: DataFrame | None = None, workers: int = 1, materialize: bool = True) -> DataFrame | None:
    """The deltas of every map from the derived relations' change between the maps'
    state `before` and `after` (rows shaped as maps.entries'); None when none changed
    or the plan has no derived relation. `after` must hold every base event. `changed`:
    the rows that turn `before` into `after` (an epoch's), when known. A derived relation
    whose rows are one per group, each a function of its own group's entries
    (view_groups), is then compared over the groups that they and the deltas of the
    derived relations before it touched, not over all of its groups: the close's cost
    follows the entries the epoch touched, not the relation's size. The relations of a
    round (`rounds`) run `workers` at a time (Spark jobs from several threads: each
    relation's are a few small ones, mostly scheduling). `materialize`: the states are
    materialized once (frames computed by earlier steps, a rebuild's); else they are read
    as they are at each use, which for scans of maps.entries (a close's) reads each map's
    partition alone: a relation then reads its own maps' files, not a copy of every
    map the derived relations need (79-80 GB per epoch over the corpus at SF 0.1)."""
    from pyspark.sql import functions as F

    # Only the maps the derived relations' views and triggers read, each state read once.
    needed = plan.derived_reads
    before, after = (s.where(F.col("map").isin(needed)) for s in (before, after))
    if materialize:
        before, after = without_statistics(before), without_statistics(after)
    changes = None if changed is None else without_statistics(unversioned(changed.where(F.col("map").isin(needed))))
    parts: list[DataFrame] = []
    state = after
    for names in rounds(plan):
        found = for_each(lambda name, state=state, changes=changes: _relation_deltas(plan, name, before, state, changes),
                         names, workers, "derived relations")
        for name in names:  # in the plan's order
            if found[name] is None:
                continue
            parts.append(found[name])
            state = state.unionByName(found[name], allowMissingColumns=True)
            if changes is not None:
                changes = changes.unionByName(found[name], allowMissingColumns=True)
    if not parts:
        return None
    return summed(union_all(parts))


def derive_epoch(home: Home, plan: BatchPlan, epoch: int) -> str | None:
    """The close's step: the derived relations' change over epoch `epoch` (the maps' rows
    of earlier epochs, before; with this epoch's, after) applied in one commit marked
    `derived-N` (kept when a retry finds it). Returns where it was evaluated: in the
    driver over a small state (driver_apply.driver_derived), else by Spark; None when
    the plan has no derived relation or a retry found the commit."""
    from pyspark.sql import functions as F

    if not plan.derived:
        return None
    started = time.perf_counter()
    record = ApplyRecord(
        batch_id=f"derived-{epoch}", kind=DERIVED, epoch=epoch, source_id=COMPACTED_SOURCE, status="started",
        ingest_batches=[], events_snapshots={}, read_snapshot=None,
        started_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
    )
    deltas, how = None, None
    if batch_commit(home, record.batch_id) is None:
        # One snapshot of maps.entries for every read of the step. A small state is
        # materialized once (each read of a scan costs its planning, more than the rows);
        # a large one is read where it is used, each read pruned to the maps it names.
        meta = table_metadata(home.spark, home.tables.maps)
        snapshot = meta.get("current-snapshot-id")
        local = None if snapshot in (None, -1) else driver_derived(
            home.settings, plan, epoch, snapshot, delta_names(plan))
        if local is not None:  # a small state: in the driver (driver_apply.py), no Spark job
            deltas, how = driver_frame(home, plan, local), IN_DRIVER
        else:
            rows = home.spark.table(home.tables.maps) if snapshot in (None, -1) else (
                home.spark.read.format("iceberg").option("snapshot-id", snapshot).load(str(home.tables.maps)))
            deltas = derived_deltas(plan, rows.where(F.col("epoch") < epoch), rows.where(F.col("epoch") <= epoch),
                                    rows.where(F.col("epoch") == epoch), workers=home.settings.table_workers,
                                    materialize=total_records(meta) <= MATERIALIZED_STATE_ROWS)
            how = BY_SPARK
    record_written(record, write_deltas(home, record, deltas))
    record.seconds = round(time.perf_counter() - started, 3)
    record.status = "done"
    record.finished_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    save_record(home, record)
    log.info("epoch %d: derived relations applied%s: %d delta rows in %d maps (%.1f s)", epoch,
             f" (evaluated {how})" if how else "", record.deltas, record.maps_written, record.seconds)
    return how
