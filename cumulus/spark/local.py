"""Rows the driver holds, as a DataFrame (`local_frame`): what the store and the steps
write from Python (manifest entries, records, ledger rows) and the small lists they join
with (a batch's files, the tuples a batch deletes); the same rows as Arrow of Spark's
types, for a write from the driver (`local_arrow`); and a DataFrame's rows in the driver,
as Arrow (`collected_arrow`).

Spark's `createDataFrame` of a Python list makes an RDD of pickled rows that a Python
worker reads again for every job that uses the frame: 0.2 s and a Python process's CPU
each time, five or more times in a micro-batch. Through Arrow (a pandas frame of Python
objects, converted by Arrow with the frame's types) the rows become a LocalRelation in the
plan: no task reads them, and a query over them alone runs in the driver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def local_frame(spark: SparkSession, rows: Sequence[Sequence], schema: str | StructType) -> DataFrame:
    """`rows` (tuples in the order of `schema`'s columns) as a DataFrame of `schema` (a DDL
    string or a StructType). The values are converted exactly as createDataFrame would:
    ints of any size, Decimals, dates, timestamps (a naive one is UTC, the session's time
    zone), None as NULL. A float NaN is the one value pandas cannot hold apart from NULL:
    rows with one take createDataFrame's own way."""
    import pandas as pd
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    if not isinstance(struct, StructType):  # a DDL string of one unnamed type
        raise TypeError(f"local_frame needs the columns' names and types, not {schema!r}")
    if not rows:  # no partition, so no task
        return spark.createDataFrame(spark.sparkContext.emptyRDD(), struct)
    if any(isinstance(v, float) and math.isnan(v) for row in rows for v in row):
        return spark.createDataFrame(list(rows), struct)
    columns = {f"c{i}": pd.Series([row[i] for row in rows], dtype=object) for i in range(len(struct.fields))}
    return spark.createDataFrame(pd.DataFrame(columns, index=range(len(rows))), struct)


def local_arrow(rows: Sequence[Sequence], schema: str) -> pa.Table:
    """`rows` (tuples in the order of `schema`'s columns, a DDL string) as an Arrow table
    of the types Spark's Arrow conversion gives those columns (decimals as decimal128,
    dates as date32, timestamps in UTC): what a PyIceberg write of rows Spark would have
    written takes (store/rows.py, append_rows)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    arrow = to_arrow_schema(_parse_datatype_string(schema))
    return pa.Table.from_arrays([pa.array([row[i] for row in rows], field.type) for i, field in enumerate(arrow)],
                                schema=arrow)


def collected_arrow(frame: DataFrame) -> pa.Table:
    """A DataFrame's rows in the driver as one Arrow table of its types (decimals as
    decimal128, dates as date32, timestamps in the session's zone), through Spark's Arrow
    collect, which toPandas uses: no row is pickled, so a few hundred thousand rows cost
    what their bytes do."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = frame._collect_as_arrow()  # (PySpark 3.5's; toArrow() is 4.0's)
    return pa.Table.from_batches(batches) if batches else to_arrow_schema(frame.schema).empty_table()
