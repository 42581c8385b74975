"""Views kept by full refresh (cumulus/sql/full.py): at each close, once the epoch is folded
into base.*, every such view's SQL is run by Spark SQL over base.* (each live tuple its
multiplicity times) and the difference with the rows its map holds is appended as delta
rows, in one commit for all of them, before the epoch's tag: its stable reads at the tag
are exact, and its fresh reads are those of the last close. A retry finds the commit (its
batch id, `refresh-<epoch>`) and writes nothing again. `view add` runs the same for one
view at the latest closed epoch (its back-fill)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.apply import ApplyRecord, batch_commit, write_deltas
from cumulus.engine.registry import as_full_view
from cumulus.errors import ViewError
from cumulus.schema import Schema
from cumulus.sql.full import POSITION, FullView, full_map, m3_type
from cumulus.store.base_sql import register_expanded_base, spark_sql
from cumulus.store.maps import (
    SPARK_DDL,
    VALUE_TYPES,
    key_slots,
    negated,
    summed,
    unversioned,
    value_slot,
)
from cumulus.store.registry import FULL, live, registry
from cumulus.store.tables import Home

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("cumulus.refresh")
REFRESH = "refresh"  # the kind of the commit of a close's full refresh


def registered_full_views(reader, settings: Settings) -> list[FullView]:
    """The registered views kept by full refresh, in registration order."""
    return [as_full_view(v) for v in live(registry(reader, settings)) if v.kind == FULL]


def full_view(home: Home, schema: Schema, name: str, sql: str, reason: str,
              dialect: str) -> FullView:
    """A view to keep by full refresh, checked by Spark SQL (its output columns and their
    types, from the plan over base.*): a query Spark cannot run is refused here, with
    Spark's own message."""
    import sqlglot

    epoch = 0
    names = register_expanded_base(home, schema, epoch, at_tag=False)
    try:
        frame = home.spark.sql(spark_sql(sql, schema, epoch, dialect))
    except Exception as exc:  # AnalysisException, ParseException: the user's query
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ViewError(f"view {name}: Spark SQL cannot run it: {first}") from None
    finally:
        for n in names:
            home.spark.catalog.dropTempView(n)
    columns, seen = [], set()
    for field in frame.schema.fields:
        column = re.sub(r"\W+", "_", field.name.lower()).strip("_") or "col"
        while column in seen or column == POSITION:
            column += "_"
        seen.add(column)
        columns.append((column, m3_type(field.dataType.simpleString())))
    tree = sqlglot.parse_one(sql, read=dialect)
    ordered = bool(tree.args.get("order") or tree.args.get("limit") or tree.args.get("offset"))
    return FullView(name, sql, tuple(columns), ordered, reason)


def refresh_views(home: Home, schema: Schema, views: Sequence[FullView], epoch: int,
                  dialect: str, batch_id: str | None = None, tag: str | None = None) -> int:
    """Bring the rows maps of `views` to their SQL over base.* (main, or `tag`) in one
    commit marked `batch_id` (default refresh-<epoch>); returns the rows it wrote (0 for a
    retry that finds the commit)."""
    batch_id = batch_id or f"{REFRESH}-{epoch}"
    if not views or batch_commit(home, batch_id) is not None:
        return 0
    started = time.perf_counter()
    names = register_expanded_base(home, schema, epoch, at_tag=tag is not None)
    try:
        deltas = [_delta(home, v, home.spark.sql(spark_sql(v.sql, schema, epoch, dialect))) for v in views]
        union = deltas[0]
        for d in deltas[1:]:
            union = union.unionByName(d, allowMissingColumns=True)
        record = ApplyRecord(batch_id=batch_id, kind=REFRESH, epoch=epoch, source_id=0, status="started",
                             ingest_batches=[], events_snapshots={}, read_snapshot=None)
        written = write_deltas(home, record, union.localCheckpoint())
    finally:
        for n in names:
            home.spark.catalog.dropTempView(n)
    log.info("epoch %d: %d view(s) refreshed in full, %d delta rows (%.1f s)", epoch, len(views), written.rows,
             time.perf_counter() - started)
    return written.rows


def _delta(home: Home, view: FullView, rows: DataFrame) -> DataFrame:
    """New rows minus the map's rows: delta rows (map, key slots, value) of its map."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    info = full_map(view)
    fields = rows.columns
    if len(fields) != len(view.columns):
        raise ViewError(f"view {view.name}: its SQL now gives {len(fields)} columns, {len(view.columns)} when added")
    keyed = rows.toDF(*(c for c, _ in view.columns))
    if view.ordered:  # its rows in the SQL's order: a position each
        keyed = keyed.withColumn("__seq", F.monotonically_increasing_id())
        keyed = keyed.withColumn(POSITION, F.row_number().over(Window.orderBy("__seq"))).drop("__seq")
        counted = keyed.withColumn("__n", F.lit(1))
    else:
        counted = keyed.groupBy(*keyed.columns).agg(F.count(F.lit(1)).alias("__n"))
    slots = key_slots(info)
    values = [F.col("__n").cast("bigint").alias(value_slot(t)) if t == info.type else
              F.lit(None).cast(SPARK_DDL[t]).alias(value_slot(t)) for t in VALUE_TYPES]
    fresh = counted.select(
        F.lit(info.name).alias("map"), *values,
        *(F.col(f"`{name}`").cast(SPARK_DDL[t]).alias(slot) for slot, name, t in zip(slots, info.key_names,
                                                                                       info.key_types, strict=True)))
    stored = unversioned(home.spark.table(home.tables.maps).where(F.col("map") == info.name)).select(
        "map", *(value_slot(t) for t in VALUE_TYPES), *slots)
    return summed(fresh.unionByName(negated(stored)))
