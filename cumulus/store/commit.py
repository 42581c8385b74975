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
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cumulus.errors import NoSuchTableError, StoreError
from cumulus.store.tables import pyiceberg_name

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
    for _, summary in ancestors(meta, snapshot_id):
        yield summary


def ancestors(meta: Mapping[str, Any], snapshot_id: int | None = None) -> Iterator[tuple[int, Mapping[str, str]]]:
    """(snapshot id, summary) of a snapshot and its ancestors, newest first (default: the
    current snapshot)."""
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots", [])}
    snap = by_id.get(snapshot_id if snapshot_id is not None else meta.get("current-snapshot-id"))
    while snap is not None:
        yield snap["snapshot-id"], snap.get("summary", {})
        snap = by_id.get(snap.get("parent-snapshot-id"))


def descends_by(meta: Mapping[str, Any], snapshot_id: int | None, operations: frozenset[str]) -> bool:
    """Whether the current snapshot is `snapshot_id` or descends from it by commits of
    these operations alone (e.g. appends only, file rewrites only)."""
    for snap, summary in ancestors(meta):
        if snap == snapshot_id:
            return True
        if summary.get("operation") not in operations:
            return False
    return False


def table_metadata(spark: SparkSession, table: str) -> dict[str, Any]:
    """The table's current Iceberg metadata (the metadata.json document) as a dict, without
    a Spark job (`spark` may also be a PyIceberg catalog). A metadata file never changes
    once written, so each is parsed once per process: with a SQLite catalog the current
    file's location is one query of the catalog database and a file already seen costs
    nothing more (a step asks for the same tables' metadata many times); otherwise it is
    read through the session's catalog (a few py4j calls)."""
    from pyiceberg.catalog import Catalog

    if isinstance(spark, Catalog):  # a PyIceberg catalog (the JVM-free readers)
        from pyiceberg.exceptions import NoSuchTableError as Missing

        try:
            return json.loads(spark.load_table(pyiceberg_name(table)).metadata.model_dump_json())
        except Missing:
            raise NoSuchTableError(f"no table {table} in the catalog") from None
    location = _metadata_location(spark, table)
    if location is None:
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import AnalysisException

        jvm = spark.sparkContext._jvm
        try:
            tbl = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
        except (Py4JJavaError, AnalysisException) as e:
            # PySpark turns the JVM's NoSuchTableException into an AnalysisException
            # (TABLE_OR_VIEW_NOT_FOUND) once its handler is installed, py4j's error before.
            missing = (e.getErrorClass() == "TABLE_OR_VIEW_NOT_FOUND" if isinstance(e, AnalysisException)
                       else "NoSuchTableException" in str(e.java_exception.getClass().getName()))
            if missing:
                raise NoSuchTableError(f"no table {table} in the catalog") from None
            raise
        return json.loads(jvm.org.apache.iceberg.TableMetadataParser.toJson(tbl.operations().current()))
    meta = _METADATA.get(location)
    if meta is None:
        meta = json.loads(Path(location.removeprefix("file:")).read_text())
        if len(_METADATA) >= _METADATA_KEPT:
            _METADATA.pop(next(iter(_METADATA)))
        _METADATA[location] = meta
    return meta


_METADATA: dict[str, dict[str, Any]] = {}  # metadata file location -> its document (immutable)
_METADATA_KEPT = 256


def _metadata_location(spark: SparkSession, table: str) -> str | None:
    """The location of `table`'s current metadata file, read from its catalog's database
    when that is SQLite and the file is local (None otherwise: ask the catalog)."""
    catalog, _, rest = table.partition(".")
    namespace, _, name = rest.rpartition(".")
    if len(name) > 1 and name[0] == name[-1] == "`":  # a quoted name (results.`<view>`)
        name = name[1:-1].replace("``", "`")
    db = _sqlite_catalog_path(spark, catalog)
    if db is None or not namespace:
        return None
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as con:
        row = con.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            (catalog, namespace, name),
        ).fetchone()
    if row is None:
        raise NoSuchTableError(f"no table {table} in the catalog")
    location = row[0]
    return location if location.startswith(("file:", "/")) and not location.endswith(".gz.metadata.json") else None


def _sqlite_catalog_path(spark: SparkSession, catalog: str) -> str | None:
    """The SQLite file of a JDBC catalog of the session (None: not a SQLite JDBC catalog).
    Asked of the session once per catalog."""
    key = (id(spark), catalog)
    if key not in _CATALOG_DB:
        uri = spark.conf.get(f"spark.sql.catalog.{catalog}.uri", None) or ""
        kind = spark.conf.get(f"spark.sql.catalog.{catalog}.type", None)
        path = uri.removeprefix("jdbc:sqlite:").split("?", 1)[0] if kind == "jdbc" and uri.startswith("jdbc:sqlite:") else None
        _CATALOG_DB[key] = path.removeprefix("file:") if path else None
    return _CATALOG_DB[key]


_CATALOG_DB: dict[tuple[int, str], str | None] = {}


def total_records(meta: Mapping[str, Any], ref: str | None = None) -> int:
    """Rows in a snapshot of a table's Iceberg metadata: the one `ref` (a tag or branch)
    names, else the current one (0 without one)."""
    current = ((meta.get("refs") or {}).get(ref) or {}).get("snapshot-id") if ref else meta.get("current-snapshot-id")
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
