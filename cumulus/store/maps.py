"""Map tables (`maps.<map>`): key columns, `value`, and the version of the delta that
wrote the row (`epoch`, `source_id`, `seq`). Apply appends deltas; the epoch close
consolidates each touched entry into one row carrying the epoch it closes (source_id 0).
Partitioned on the first key (the key programs look entries up by), sorted by the keys
inside files, so a batch reads only the files its keys can be in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.evaluate import key_type, value_type
from cumulus.m3.validate import MapInfo
from cumulus.store.tables import MAPS, MERGE_ON_READ, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VERSION_COLUMNS = (("epoch", "BIGINT"), ("source_id", "INT"), ("seq", "BIGINT"))
CONSOLIDATED_SOURCE = 0  # source_id of rows written by the epoch close
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

