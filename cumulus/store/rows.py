"""Reading the small metadata tables (ledger, files, quarantine) from either a
SparkSession or a PyIceberg catalog: the CLI's read-only commands use PyIceberg (no JVM,
about 3 s), the pipeline's jobs use their Spark session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Reader = Any  # a pyspark.sql.SparkSession or a pyiceberg Catalog


def is_spark(reader: Reader) -> bool:
    return hasattr(reader, "sparkContext")


def read_rows(reader: Reader, table: str, where: Mapping[str, Any] | None = None) -> list[dict]:
    """Rows of `table` (a qualified Spark name, catalog.namespace.table) whose columns
    equal the values of `where` (None matches NULL), as dicts."""
    where = dict(where or {})
    if is_spark(reader):
        from pyspark.sql import functions as F

        df = reader.table(table)
        for column, value in where.items():
            df = df.where(F.col(column).isNull() if value is None else F.col(column) == value)
        return [row.asDict() for row in df.collect()]

    from pyiceberg.expressions import AlwaysTrue, And, EqualTo, IsNull

    expr = AlwaysTrue()
    for column, value in where.items():
        term = IsNull(column) if value is None else EqualTo(column, value)
        expr = term if isinstance(expr, AlwaysTrue) else And(expr, term)
    identifier = table.split(".", 1)[1]  # PyIceberg names drop the catalog
    tbl = reader.load_table(identifier)
    return tbl.scan(row_filter=expr).to_arrow().to_pylist()
