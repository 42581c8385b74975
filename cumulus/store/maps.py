"""Map tables (`maps.<map>`): key columns, `value`, and the version of the delta that
wrote the row (`epoch`, `source_id`, `seq`). Apply appends deltas and nothing rewrites
them on the hot path: an entry's value at any snapshot is the sum of its rows (zero sums
are absent entries), as every reader computes it (lazy Cleanup). Compaction (the paper's
Cleanup, amortized) rewrites the rows of closed epochs as one row per entry, carrying the
epoch compacted through (source_id 0): after a close once the delta rows outgrow
`map_compaction_ratio` of the compacted rows (and `map_compaction_min_rows`), and in
maintenance. It is one overwrite commit that changes no entry's value, so tags and the
main branch read the same before and after, a crash leaves either state, and a retry
finds nothing to do.
Partitioned on the first key (the key programs look entries up by), sorted by the keys
inside files, so a batch reads only the files its keys can be in."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cumulus.config import Settings
from cumulus.engine.evaluate import key_type, value_type
from cumulus.m3.validate import MapInfo
from cumulus.store import commit
from cumulus.store.tables import MAPS, MERGE_ON_READ, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cumulus.maps")

VERSION_COLUMNS = (("epoch", "BIGINT"), ("source_id", "INT"), ("seq", "BIGINT"))
COMPACTED_SOURCE = 0  # source_id of the rows a compaction writes
COMPACTED_THROUGH = "cumulus.map-compacted-through"  # commit mark: the closed epoch compacted through
BUCKETS = 8



def map_table(settings: Settings, name: str) -> str:
    return qualified(settings, MAPS, name)


def map_columns(info: MapInfo) -> list[tuple[str, str]]:
    # The Spark types the evaluator computes with, as DDL: one mapping for both.
    keys = [(k, key_type(t).simpleString()) for k, t in zip(info.key_names, info.key_types, strict=True)]
    return keys + [("value", value_type(info).simpleString())] + list(VERSION_COLUMNS)


def create_map_table(spark: SparkSession, settings: Settings, info: MapInfo) -> bool:
    """Create `maps.<name>` if missing, with one empty snapshot so it can be read and
    tagged before its first delta. True when it was created."""
    table = map_table(settings, info.name)
    if spark.catalog.tableExists(table):
        return False
    cols = ", ".join(f"`{c}` {t}" for c, t in map_columns(info))
    partition = f" PARTITIONED BY (bucket({BUCKETS}, `{info.key_names[0]}`))" if info.key_names else ""
    spark.sql(
        f"CREATE TABLE {table} ({cols}) USING iceberg{partition} "
        f"TBLPROPERTIES ('format-version' = '2', 'write.distribution-mode' = 'hash', {MERGE_ON_READ})"
    )
    if info.key_names:
        spark.sql(f"ALTER TABLE {table} WRITE ORDERED BY {', '.join(f'`{k}`' for k in info.key_names)}")
    # An empty first snapshot (an append of no rows commits one; DELETE ... WHERE false does not).
    spark.createDataFrame([], ", ".join(f"`{c}` {t}" for c, t in map_columns(info))).writeTo(table).append()
    return True


@dataclass(frozen=True)
class MapRows:
    """Where a map table stands since its last compaction, from its metadata alone:
    `pending` delta rows of epochs up to the one asked about were appended after it,
    which left `compacted_rows` rows (0: never compacted)."""

    pending: int
    compacted_rows: int


def map_rows_in(meta: Mapping[str, Any], through: int) -> MapRows:
    """The map's rows at its current snapshot (a metadata.json document): walks the
    ancestry back to the nearest compaction, counting the rows appended by deltas of
    epochs <= `through` (apply, repair and back-fill commits carry `cumulus.epoch`; file
    rewrites of maintenance add no rows and are skipped)."""
    pending = 0
    for summary in commit.summaries_back(meta):
        if COMPACTED_THROUGH in summary:
            return MapRows(pending, int(summary.get("total-records", 0)))
        if summary.get("operation") == "append" and int(summary.get(commit.EPOCH, through)) <= through:
            pending += int(summary.get("added-records", 0))
    return MapRows(pending, 0)


def compact_map(spark: SparkSession, settings: Settings, name: str, through: int, *, when_due: bool = False) -> int:
    """Rewrite the rows of epochs <= `through` (closed: nothing repairs them any more) of
    `maps.<name>` as one row per entry, zero sums dropped, and keep the later rows as they
    are, in one overwrite commit marked `cumulus.map-compacted-through`. Does nothing
    when no such row was appended since the last compaction, nor, `when_due` (the
    close), unless those rows exceed `map_compaction_ratio` times the rows it left and
    `map_compaction_min_rows`. Every snapshot reads the same values before and after.
    The caller holds the catalog lock. Returns the delta rows compacted (0: none)."""
    from pyspark.sql import functions as F

    table = map_table(settings, name)
    state = map_rows_in(commit.table_metadata(spark, table), through)
    due = state.pending > max(settings.map_compaction_ratio * state.compacted_rows, settings.map_compaction_min_rows)
    if state.pending == 0 or (when_due and not due):
        return 0
    started = time.perf_counter()
    rows = spark.table(table)
    versions = {c for c, _ in VERSION_COLUMNS}
    keys = [F.col(f"`{f.name}`") for f in rows.schema.fields if f.name != "value" and f.name not in versions]
    summed = (
        rows.where(F.col("epoch") <= through)
        .groupBy(*keys)
        .agg(F.sum("value").cast(rows.schema["value"].dataType).alias("value"))
        .where(F.col("value") != 0)
        .select(
            *keys, "value", F.lit(through).cast("bigint").alias("epoch"),
            F.lit(COMPACTED_SOURCE).cast("int").alias("source_id"), F.lit(0).cast("bigint").alias("seq"),
        )
    )
    kept = rows.where(F.col("epoch") > through)
    props = commit.write_options({COMPACTED_THROUGH: through})
    summed.unionByName(kept).writeTo(table).options(**props).overwrite(F.lit(True))
    log.info("maps.%s: compacted %d delta rows through epoch %d (%.1f s)",
             name, state.pending, through, time.perf_counter() - started)
    return state.pending
