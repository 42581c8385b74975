"""Marks on Iceberg commits: properties written into a snapshot's summary, and reading
them back. Every step records what it committed this way (`cumulus.batch-id` on event
appends, `cumulus.folded-epoch` on base folds), so a retry decides what is done from the
tables themselves.

DataFrameWriterV2 writes take the properties as options (`write_options`). SQL statements
(MERGE, UPDATE, DELETE) cannot, so `commit_properties` sets the thread-local that Iceberg's
`CommitMetadata.withCommitProperties` sets, around the statement. It relies on PySpark's
pinned-thread mode (the default): the Python thread that runs the statement maps to one
JVM thread, the one that commits.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cumulus.errors import StoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "cumulus."  # every property Cumulus writes starts with it
BATCH_ID = "cumulus.batch-id"
SOURCE = "cumulus.source"
SOURCE_ID = "cumulus.source-id"
EPOCH = "cumulus.epoch"
FOLDED_EPOCH = "cumulus.folded-epoch"
ROLLBACK_OF = "cumulus.rollback-of"


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    committed_at: int  # milliseconds since the epoch
    operation: str
    summary: Mapping[str, str]


def write_options(properties: Mapping[str, Any]) -> dict[str, str]:
    """DataFrameWriterV2 options that put `properties` into the commit's summary."""
    return {f"snapshot-property.{k}": str(v) for k, v in properties.items()}


@contextmanager
def commit_properties(spark: SparkSession, properties: Mapping[str, Any]) -> Iterator[None]:
    """Snapshot-summary properties for every Iceberg commit a SQL statement of this thread
    makes inside the block (MERGE INTO, UPDATE, DELETE FROM, INSERT INTO)."""
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() == "false":
        raise StoreError("commit properties need PySpark's pinned-thread mode (PYSPARK_PIN_THREAD)")
    jvm = spark.sparkContext._jvm
    holder = _thread_local(spark)
    props = jvm.java.util.HashMap()
    for key, value in properties.items():
        props.put(str(key), str(value))
    holder.set(props)
    try:
        yield
    finally:
        holder.set(jvm.java.util.HashMap())


def _thread_local(spark: SparkSession):
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName("org.apache.iceberg.spark.CommitMetadata", True, loader)
    field = cls.getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    return field.get(None)


def summaries_back(meta: Mapping[str, Any], snapshot_id: int | None = None) -> Iterator[Mapping[str, str]]:
    """The summaries (operation included) of a snapshot and its ancestors, newest first,
    from a table's metadata.json document; default: the current snapshot."""
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots", [])}
    snap = by_id.get(snapshot_id if snapshot_id is not None else meta.get("current-snapshot-id"))
    while snap is not None:
        yield snap.get("summary", {})
        snap = by_id.get(snap.get("parent-snapshot-id"))


def table_metadata(spark: SparkSession, table: str) -> dict[str, Any]:
    """The table's current Iceberg metadata (the metadata.json document) as a dict, read
    through the session's catalog without a Spark job: a few py4j calls."""
    jvm = spark.sparkContext._jvm
    tbl = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    return json.loads(jvm.org.apache.iceberg.TableMetadataParser.toJson(tbl.operations().current()))


def total_records(meta: Mapping[str, Any]) -> int:
    """Rows in the current snapshot of a table's Iceberg metadata (0 without one)."""
    current = meta.get("current-snapshot-id")
    for snap in meta.get("snapshots", []):
        if snap["snapshot-id"] == current:
            return int(snap.get("summary", {}).get("total-records", 0))
    return 0


def snapshots(spark: SparkSession, table: str) -> list[Snapshot]:
    """Every snapshot of `table` (a qualified Spark name), oldest first."""
    found = []
    for snap in table_metadata(spark, table).get("snapshots", []):
        summary = dict(snap.get("summary", {}))
        operation = summary.pop("operation", "")
        found.append(
            Snapshot(
                snap["snapshot-id"],
                snap.get("parent-snapshot-id"),
                snap["timestamp-ms"],
                operation,
                summary,
            )
        )
    return sorted(found, key=lambda s: (s.committed_at, s.snapshot_id))
