"""The Spark frames the suites of expectations/ run on: every table of a kind at the tag
`epoch-N`, stacked into one long frame (one row per stored row, a column naming the
table). One GX validation per kind instead of one per table: GX pays several Spark jobs
per expectation whatever the data size, so per-table suites would cost minutes per epoch
for a few dozen maps; the stacked frame costs the same few jobs for any number of tables.

Keys and tuples become JSON objects (`to_json` with NULL fields kept): equal keys give
equal text, so uniqueness is NULL-safe, and a failing row reads well in a report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.quality.facts import MapFacts
from cumulus.schema import Relation
from cumulus.store.maps import map_slice, maps_table
from cumulus.store.tables import base_table, events_table, tag_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MAPS_SCHEMA = "map STRING, key STRING, value DOUBLE, kind STRING, null_key STRING"
BASE_SCHEMA = "relation STRING, tuple STRING, mult BIGINT"
EVENTS_SCHEMA = "relation STRING, op INT, epoch BIGINT, source_id INT, seq BIGINT, batch_id STRING"


def at_tag(spark: SparkSession, table: str, epoch: int) -> DataFrame:
    """`table` as of the tag `epoch-N` (the same as `VERSION AS OF 'epoch-N'`)."""
    return spark.read.format("iceberg").option("tag", tag_name(epoch)).load(table)


def json_of(columns: Sequence[str]) -> Column:
    """The columns as one JSON object, NULL fields kept ({} for no columns)."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit("{}")
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]), {"ignoreNullFields": "false"})


def _touched(frame: DataFrame, changed: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of `frame` whose `columns` equal (NULL-safe) those of a row of `changed`."""
    from pyspark.sql import functions as F

    if not columns:
        return frame.join(changed.limit(1).select(F.lit(1).alias("__one")), how="left_semi")
    keys = changed.select(*[F.col(f"`{c}`").alias(f"__t{i}") for i, c in enumerate(columns)]).distinct()
    cond = [F.col(f"`{c}`").eqNullSafe(F.col(f"__t{i}")) for i, c in enumerate(columns)]
    return frame.join(keys, cond, "left_semi")


def maps_frame(
    spark: SparkSession, settings: Settings, maps: Iterable[MapFacts], epoch: int, *, touched: bool = False
) -> DataFrame:
    """One row per entry, as readers see it: a map's rows at the tag summed per key, zero
    sums left out (absent entries). Columns: map, key (JSON), value (the sum, as DOUBLE;
    NULL only if every row of the entry had none), kind (count | value), null_key (the
    first key column that is NULL although it cannot be, else NULL). `touched`: only the
    entries the epoch wrote a row to (a compaction through the epoch marks them all)."""
    from pyspark.sql import functions as F

    tagged = at_tag(spark, maps_table(settings), epoch)
    parts = []
    for m in maps:
        null_key = (
            F.coalesce(*[F.when(F.col(f"`{k}`").isNull(), F.lit(k)) for k in m.not_null_keys])
            if m.not_null_keys
            else F.lit(None).cast("string")
        )
        entries = (
            map_slice(tagged, m.info)
            .groupBy(*[F.col(f"`{k}`") for k in m.keys])
            .agg(F.sum("value").alias("value"), F.count(F.lit(1)).alias("rows"))
            .where((F.col("rows") > 0) & (F.col("value").isNull() | (F.col("value") != 0)))
        )
        if touched:
            entries = _touched(entries, map_slice(tagged.where(F.col("epoch") == epoch), m.info), m.keys)
        parts.append(
            entries.select(
                F.lit(m.name).alias("map"),
                json_of(m.keys).alias("key"),
                F.col("value").cast("double").alias("value"),
                F.lit(m.kind).alias("kind"),
                null_key.alias("null_key"),
            )
        )
    return _stack(spark, parts, MAPS_SCHEMA)


def base_frame(
    spark: SparkSession, settings: Settings, relations: Iterable[Relation], epoch: int, *, touched: bool = False
) -> DataFrame:
    """Columns: relation, tuple (JSON of the relation's columns), mult: one row per tuple
    stored with a nonzero count (the fold layers summed, cumulus.store.fold.base_rows).
    `touched`: only the tuples the epoch's events changed."""
    from pyspark.sql import functions as F

    from cumulus.store.fold import base_rows

    parts = []
    for r in relations:
        rows = base_rows(spark, base_table(settings, r.name), list(r.column_names), tag_name(epoch), live=False)
        if touched:
            changed = spark.table(events_table(settings, r.name)).where(F.col("epoch") == epoch)
            rows = _touched(rows, changed, list(r.column_names))
        parts.append(rows.select(
            F.lit(r.name).alias("relation"),
            json_of(r.column_names).alias("tuple"),
            F.col("mult").cast("bigint").alias("mult"),
        ))
    return _stack(spark, parts, BASE_SCHEMA)


def events_frame(spark: SparkSession, settings: Settings, relations: Iterable[Relation], epoch: int) -> DataFrame:
    """Columns: relation, op, epoch, source_id, seq, batch_id of every event of `epoch`.
    events.* is not tagged; its epoch partition no longer changes once the epoch is sealed."""
    from pyspark.sql import functions as F

    parts = [
        spark.table(events_table(settings, r.name))
        .where(F.col("epoch") == epoch)
        .select(F.lit(r.name).alias("relation"), "op", "epoch", "source_id", "seq", "batch_id")
        for r in relations
    ]
    return _stack(spark, parts, EVENTS_SCHEMA)


def materialize(frame: DataFrame) -> DataFrame:
    """The frame read once and kept: GX runs several Spark jobs per expectation, and
    without this each of them would plan and scan every stacked table again. Fewer
    partitions than tables (a stacked frame has at least one per table) keep the many
    small jobs cheap; the unpersist is the caller's."""
    spark = frame.sparkSession
    partitions = max(1, min(frame.rdd.getNumPartitions(), spark.sparkContext.defaultParallelism))
    kept = frame.coalesce(partitions).persist()
    kept.count()
    return kept


def _stack(spark: SparkSession, parts: list[DataFrame], schema: str) -> DataFrame:
    if not parts:
        return spark.createDataFrame([], schema)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out
