"""Reading the small metadata tables (ledger, applies, files, views, quarantine) from
either a SparkSession or a PyIceberg catalog: the CLI's read-only commands use PyIceberg
(no JVM, about 3 s), the pipeline's jobs mostly their Spark session. `append_rows`
writes rows from the driver by PyIceberg (a small ingest batch: ingest/driver.py).

A step asks for the same rows several times (the close reads the ledger and the applies
before and after its writes), and a warm engine asks every epoch. Through Spark, the
rows read are kept per table, filter and snapshot: the same snapshot again costs no
Spark job, a snapshot reached from the kept one by appends only (these tables are
append-only between compactions) reads just the appended files, and a table without a
snapshot reads nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from cumulus.config import Settings
from cumulus.store import commit
from cumulus.store.catalog import shared_catalog
from cumulus.store.tables import pyiceberg_name

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyspark.sql import SparkSession

# What the store's read functions take: the step's Spark session, or a PyIceberg catalog
# (no JVM). row_reader() gives the RowReader of either.
Reader: TypeAlias = "SparkSession | Catalog | RowReader"


class RowReader(Protocol):
    """Reads a metadata table's rows: `rows(table, where)` gives the rows of `table` (a
    qualified Spark name, catalog.namespace.table) whose columns equal `where`'s values
    (None matches NULL), as dicts. Two implementations: SparkRows and IcebergRows."""

    def rows(self, table: str, where: Mapping[str, Any]) -> list[dict]: ...


@dataclass(frozen=True)
class SparkRows:
    """Through the step's Spark session, the rows kept per table snapshot (module doc)."""

    spark: SparkSession

    def rows(self, table: str, where: Mapping[str, Any]) -> list[dict]:
        return _spark_rows(self.spark, table, where)


@dataclass(frozen=True)
class IcebergRows:
    """Through a PyIceberg catalog, each data file read once per process (scan_arrow)."""

    catalog: Catalog

    def rows(self, table: str, where: Mapping[str, Any]) -> list[dict]:
        from pyiceberg.expressions import AlwaysTrue, And, EqualTo, IsNull

        expr = AlwaysTrue()
        for column, value in where.items():
            term = IsNull(column) if value is None else EqualTo(column, value)
            expr = term if isinstance(expr, AlwaysTrue) else And(expr, term)
        return scan_arrow(self.catalog.load_table(pyiceberg_name(table)).scan(row_filter=expr)).to_pylist()


def row_reader(reader: Reader) -> RowReader:
    """The RowReader of a Spark session or a PyIceberg catalog (a RowReader as it is);
    TypeError for anything else."""
    if isinstance(reader, SparkRows | IcebergRows):
        return reader
    from pyiceberg.catalog import Catalog

    if isinstance(reader, Catalog):
        return IcebergRows(reader)
    from pyspark.sql import SparkSession

    if isinstance(reader, SparkSession):
        return SparkRows(reader)
    raise TypeError(f"a reader is a SparkSession or a PyIceberg Catalog, not {type(reader).__name__}")


def is_spark(reader: Reader) -> bool:
    return isinstance(row_reader(reader), SparkRows)


def read_rows(reader: Reader, table: str, where: Mapping[str, Any] | None = None) -> list[dict]:
    """Rows of `table` (a qualified Spark name, catalog.namespace.table) whose columns
    equal the values of `where` (None matches NULL), as dicts."""
    return row_reader(reader).rows(table, dict(where or {}))


def append_rows(settings: Settings, table: str, rows: pa.Table, properties: Mapping[str, Any]) -> None:
    """One append commit of `rows` to `table` (a qualified Spark name) from the driver, by
    PyIceberg (no Spark job), with `properties` in its snapshot summary as a Spark write
    with `commit.write_options` puts them. The rows are taken by the table's column names
    and cast to its types. Callers hold the catalog lock (a commit from elsewhere between
    this one's read of the table and its commit fails it, as Iceberg's optimistic commit
    does, and the caller's step is retried whole)."""
    target = shared_catalog(settings).load_table(pyiceberg_name(table))
    schema = target.schema().as_arrow()
    target.append(rows.select(schema.names).cast(schema), snapshot_properties={k: str(v) for k, v in properties.items()})


def scan_arrow(scan, tasks: list | None = None, read_bytes: list[int] | None = None):
    """A PyIceberg scan as one Arrow table, each data file read once per process: its rows
    (under the scan's projection and filter) are kept by file path, and data files never
    change, so a table that grows by appends (the ledger, the maps) reads only the files
    added since. A scan with delete files is read whole, as PyIceberg does. `tasks`: the
    scan's planned files, when the caller has planned them; `read_bytes[0]` grows by the
    size of the data files read (not those kept)."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import ArrowScan

    tasks = list(scan.plan_files()) if tasks is None else tasks
    if not tasks or any(task.delete_files for task in tasks):
        if read_bytes is not None:
            read_bytes[0] += sum(t.file.file_size_in_bytes for t in tasks)
        return scan.to_arrow()
    projection = scan.projection()
    shape = (str(scan.row_filter), tuple(f.field_id for f in projection.fields), scan.case_sensitive)
    keys = [(t.file.file_path, shape) for t in tasks]
    got = {k: _FILES[k] for k in keys if k in _FILES}
    missing = [t for t, k in zip(tasks, keys, strict=True) if k not in got]
    if read_bytes is not None:
        read_bytes[0] += sum(t.file.file_size_in_bytes for t in missing)
    if missing:
        from concurrent.futures import ThreadPoolExecutor

        arrow = ArrowScan(scan.table_metadata, scan.io, projection, scan.row_filter, scan.case_sensitive)
        with ThreadPoolExecutor(max_workers=8) as pool:
            for task, rows in zip(missing, pool.map(lambda t: arrow.to_table([t]), missing), strict=True):
                got[(task.file.file_path, shape)] = rows
                _keep_file((task.file.file_path, shape), rows)
    return pa.concat_tables([got[k] for k in keys], promote_options="permissive")


_FILES: dict[tuple, Any] = {}  # (data file path, projection and filter) -> its rows (Arrow)
_FILES_BYTES = [0]
_FILES_KEPT_BYTES = 256 << 20


def _keep_file(key: tuple, table) -> None:
    _FILES[key] = table
    _FILES_BYTES[0] += table.nbytes
    while _FILES_BYTES[0] > _FILES_KEPT_BYTES and len(_FILES) > 1:
        _FILES_BYTES[0] -= _FILES.pop(next(iter(_FILES))).nbytes


_KEPT: dict[tuple, tuple[int, list[dict]]] = {}  # (table uuid, schema, table, filter) -> (snapshot, rows)
_KEPT_ROWS = 100_000  # rows kept per (table, filter) at most
_KEPT_KEYS = 256  # (table, filter) pairs kept, the least recently read dropped first


def _spark_rows(spark: SparkSession, table: str, where: Mapping[str, Any]) -> list[dict]:
    from pyspark.sql import functions as F

    meta = commit.table_metadata(spark, table)
    current = meta.get("current-snapshot-id")
    if current in (None, -1):
        return []
    key = (meta.get("table-uuid"), meta.get("current-schema-id"), table, tuple(sorted(where.items())))
    kept = _KEPT.get(key)
    reader = spark.read.format("iceberg")
    if kept is not None and kept[0] == current:
        return [dict(r) for r in kept[1]]
    if kept is not None and commit.descends_by(meta, kept[0], frozenset({"append"})):
        reader = reader.option("start-snapshot-id", kept[0]).option("end-snapshot-id", current)
        rows = list(kept[1])
    else:  # pinned: the rows kept are those of `current`, whatever commits meanwhile
        reader, rows = reader.option("snapshot-id", current), []
    df = reader.load(table)
    for column, value in where.items():
        df = df.where(F.col(column).isNull() if value is None else F.col(column) == value)
    rows += [row.asDict() for row in df.collect()]
    if len(rows) <= _KEPT_ROWS:
        _KEPT.pop(key, None)
        if len(_KEPT) >= _KEPT_KEYS:
            _KEPT.pop(next(iter(_KEPT)))
        _KEPT[key] = (current, rows)
    return [dict(r) for r in rows]
