"""Row-level changes of an Iceberg table made by the driver: some rows deleted by
position, others added, and a tag, in one commit. PyIceberg 0.12 writes no delete file
(its deletes rewrite every data file they touch), so the driver writes the two files
itself (Parquet, through the table's FileIO) and commits them with Iceberg's RowDelta in
the driver's JVM (the Java library Spark already loaded), as Spark's merge-on-read MERGE
commits its own: a position delete file names (data file, row position) pairs, read as
deleted by every Iceberg reader (Spark, PyIceberg, DuckDB, Trino).

A table of millions of rows whose touched groups are a few thousand is then updated by
reading its group columns (to find the rows' positions) and writing those groups' rows,
not by a scan and rewrite of every data file they touch."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cumulus.errors import StoreError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

FILE, POS = "__file", "__pos"  # the columns of live_rows that place a row: its data file (an index), position
# The reserved field ids of a position delete file's columns (the Iceberg spec's).
_DELETE_FIELDS = (("file_path", 2147483546), ("pos", 2147483545))


@dataclass(frozen=True)
class Live:
    """A table's live rows (live_rows): some columns, each row's data file (`__file`, an
    index into `files`) and position in it (`__pos`), as of `snapshot`."""

    rows: pa.Table
    files: list[str]
    snapshot: int | None


def live_rows(table: Any, columns: Sequence[str]) -> Live:
    """Every live row of the PyIceberg `table`'s current snapshot: its `columns` read from
    each data file, with the file and the row's position in it, the rows its position
    delete files delete left out. A table with an equality delete file (none of Cumulus's
    writers makes one) is refused."""
    import numpy
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFileContent

    snapshot = table.metadata.current_snapshot_id
    empty = pa.schema([*(table.schema().as_arrow().field(c) for c in columns),
                       pa.field(FILE, pa.int32()), pa.field(POS, pa.int64())])
    if snapshot is None:
        return Live(empty.empty_table(), [], None)
    deleted: dict[str, dict[str, list]] = {}  # delete file -> data file -> positions

    def positions_deleted(delete_file, path: str) -> list:
        if delete_file.content != DataFileContent.POSITION_DELETES:
            raise StoreError(f"{table.name()}: an equality delete file ({delete_file.file_path}); "
                             f"Cumulus writes none: rewrite the table")
        if delete_file.file_path not in deleted:
            with table.io.new_input(delete_file.file_path).open() as stream:
                rows = pq.read_table(stream, columns=["file_path", "pos"])
            by_file: dict[str, list] = {}
            for name, group in zip(*_split(rows.column("file_path"), rows.column("pos")), strict=True):
                by_file[name] = group
            deleted[delete_file.file_path] = by_file
        return deleted[delete_file.file_path].get(path, [])

    parts, files = [], []
    for task in table.scan(snapshot_id=snapshot).plan_files():
        path = task.file.file_path
        with table.io.new_input(path).open() as stream:
            rows = pq.read_table(stream, columns=list(columns))
        rows = rows.append_column(FILE, pa.array(numpy.full(rows.num_rows, len(files), dtype=numpy.int32))) \
                   .append_column(POS, pa.array(numpy.arange(rows.num_rows, dtype=numpy.int64)))
        files.append(path)
        gone = [positions for d in task.delete_files if len(positions := positions_deleted(d, path))]
        if gone:
            rows = rows.filter(pc.invert(pc.is_in(rows.column(POS), pa.concat_arrays(gone))))
        parts.append(rows.cast(empty))
    return Live(pa.concat_tables(parts) if parts else empty.empty_table(), files, snapshot)


def _split(paths: pa.ChunkedArray, positions: pa.ChunkedArray) -> tuple[list[str], list]:
    """A position delete file's rows grouped by data file: (paths, their positions)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    positions = positions.combine_chunks().cast(pa.int64())
    encoded = paths.combine_chunks().dictionary_encode()
    names, indices = encoded.dictionary.to_pylist(), encoded.indices
    return names, [positions.filter(pc.equal(indices, i)) for i in range(len(names))]


def commit_row_delta(spark: SparkSession, name: str, table: Any, added: pa.Table, doomed: pa.Table, live: Live,
                     properties: Mapping[str, str], tag: str) -> None:
    """Delete the rows `doomed` (`__file`, `__pos`: of `live`, the table's live_rows) of the
    Iceberg table `name` (Spark's name; `table`: PyIceberg's of it) and add the rows
    `added` (its columns), and tag the result, in one commit carrying `properties`. The
    commit fails (Iceberg's validation, nothing committed) when another commit since
    the live rows' snapshot added a data or delete file or removed a data file a delete
    names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    java = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, str(name))
    java.refresh()
    if java.spec().isPartitioned():
        raise StoreError(f"{name}: partitioned; the driver's row deltas are of unpartitioned tables")
    snapshot = live.snapshot
    if java.currentSnapshot() is None or java.currentSnapshot().snapshotId() != snapshot:
        raise StoreError(f"{name}: changed since its rows were read (snapshot {snapshot}); try again")
    parquet = iceberg.FileFormat.PARQUET
    tx = java.newTransaction()
    # Any data or delete file another commit added since `snapshot` fails it, as Spark's
    # serializable MERGE does (so does one removing a data file that a delete names).
    delta = tx.newRowDelta().validateFromSnapshot(snapshot).validateDeletedFiles() \
        .conflictDetectionFilter(iceberg.expressions.Expressions.alwaysTrue()) \
        .validateNoConflictingDataFiles().validateNoConflictingDeleteFiles()
    if added.num_rows:
        path = _write(java, table, added.cast(table.schema().as_arrow()), "data")
        file = java.io().newInputFile(path)
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(file, iceberg.MetricsConfig.forTable(java))
        delta.addRows(iceberg.DataFiles.builder(java.spec()).withInputFile(file).withFormat(parquet)
                      .withMetrics(metrics).build())
    if doomed.num_rows:
        paths = pa.array(live.files, pa.string())
        ordered = pa.table({FILE: pc.take(paths, doomed.column(FILE)), POS: doomed.column(POS)}) \
            .sort_by([(FILE, "ascending"), (POS, "ascending")])  # (the spec's order)
        rows = pa.table([ordered.column(FILE), ordered.column(POS).cast(pa.int64())],
                        schema=pa.schema([pa.field(n, t, nullable=False, metadata={"PARQUET:field_id": str(i)})
                                          for (n, i), t in zip(_DELETE_FIELDS, (pa.string(), pa.int64()),
                                                               strict=True)]))
        path = _write(java, table, rows, "deletes")
        file = java.io().newInputFile(path)
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
            file, iceberg.MetricsConfig.forPositionDelete(java))
        builder = iceberg.FileMetadata.deleteFileBuilder(java.spec()).ofPositionDeletes() \
            .withInputFile(file).withFormat(parquet).withMetrics(metrics)
        files = pc.unique(ordered.column(FILE)).to_pylist()
        if len(files) == 1:  # (a reader then applies it to that file alone)
            builder = builder.withReferencedDataFile(files[0])
        delta.addDeletes(builder.build())
        delta.validateDataFilesExist(jvm.java.util.ArrayList(files))
    for key, value in properties.items():
        delta.set(key, str(value))
    delta.commit()
    tx.manageSnapshots().createTag(tag, tx.table().currentSnapshot().snapshotId()).commit()
    tx.commitTransaction()


def _write(java: Any, table: Any, rows: pa.Table, kind: str) -> str:
    """Write `rows` as a Parquet file where the table's data files go (its location
    provider, through PyIceberg's FileIO); returns its path."""
    import pyarrow.parquet as pq

    path = java.locationProvider().newDataLocation(f"cumulus-{kind}-{uuid.uuid4()}.parquet")
    with table.io.new_output(path).create() as stream:
        pq.write_table(rows, stream)
    return path
