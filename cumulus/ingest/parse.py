"""The parse stage of the ingest job: units of input files become one wide Spark
DataFrame, parsed in parallel by Python tasks (`mapInArrow`, one unit per task). A file
of valid inserts in CSV, static DBToaster or Parquet is converted by Arrow in one go
(fastpath.py); everything else, and every file with a doubt, row by row (formats.py).

Every record is one row: working columns (`__unit`, `__pos`, `__file`, `__line`,
`__relation`, `__op`, `__reason`, `__detail`, `__raw`) and, for every relation R and
column c, a typed column `v<R>_<c>` (numbered, so no name can clash), set on R's valid
rows. `relation_rows` selects one relation's valid rows under their own column names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from cumulus.ingest.formats import Codec, Record, codecs, read_file
from cumulus.ingest.plan import Unit
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, Column, Relation, Schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

BATCH_ROWS = 8192
META = (
    ("__unit", "INT"),
    ("__pos", "BIGINT"),
    ("__file", "INT"),
    ("__line", "BIGINT"),
    ("__relation", "STRING"),
    ("__op", "INT"),
    ("__reason", "STRING"),
    ("__detail", "STRING"),
    ("__raw", "STRING"),
)


def value_column(ri: int, ci: int) -> str:
    return f"v{ri}_{ci}"


def spark_ddl(schema: Schema) -> str:
    cols = [f"`{n}` {t}" for n, t in META]
    for ri, rel in enumerate(schema.relations):
        cols += [f"`{value_column(ri, ci)}` {c.sql_type}" for ci, c in enumerate(rel.columns)]
    return ", ".join(cols)


def _arrow_type(col: Column):
    import pyarrow as pa

    if col.type == INT:
        return pa.int64()
    if col.type == DECIMAL:
        return pa.decimal128(col.precision or 38, col.scale if col.scale is not None else 10)
    if col.type == FLOAT:
        return pa.float64()
    if col.type == DATE:
        return pa.date32()
    if col.type == BOOL:
        return pa.bool_()
    return pa.string()


def arrow_schema(schema: Schema) -> pa.Schema:
    import pyarrow as pa

    meta_types = {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string()}
    fields = [pa.field(n, meta_types[t]) for n, t in META]
    for ri, rel in enumerate(schema.relations):
        fields += [pa.field(value_column(ri, ci), _arrow_type(c)) for ci, c in enumerate(rel.columns)]
    return pa.schema(fields)


def unit_records(unit: Unit, schema: Schema, codec_map: dict[str, Codec]) -> Iterator[tuple[int, int, Record]]:
    """(file index, pos, record) of a unit, in the unit's order (pos = 0, 1, ...)."""
    if not unit.interleave:
        pos = 0
        for file in unit.files:
            for rec in read_file(file.path, file.fmt, schema, file.relation, codec_map):
                yield file.index, pos, rec
                pos += 1
        return
    rank = {name: i for i, name in enumerate(schema.names)}
    items = [
        (file.index, rec)
        for file in unit.files
        for rec in read_file(file.path, file.fmt, schema, file.relation, codec_map)
    ]
    items.sort(key=lambda it: (it[1].order, rank.get(it[1].relation or "", len(rank)), it[0], it[1].line))
    for pos, (file_index, rec) in enumerate(items):
        yield file_index, pos, rec


def to_batch(unit: int, items: list[tuple[int, int, Record]], schema: Schema, target: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    n = len(items)
    recs = [r for _, _, r in items]
    arrays = [
        pa.array([unit] * n, pa.int32()),
        pa.array([p for _, p, _ in items], pa.int64()),
        pa.array([f for f, _, _ in items], pa.int32()),
        pa.array([r.line for r in recs], pa.int64()),
        pa.array([r.relation for r in recs], pa.string()),
        pa.array([r.op for r in recs], pa.int32()),
        pa.array([r.reason for r in recs], pa.string()),
        pa.array([r.detail for r in recs], pa.string()),
        pa.array([r.raw for r in recs], pa.string()),
    ]
    rows_of: dict[str, list[int]] = {}
    for i, r in enumerate(recs):
        if r.values is not None:
            rows_of.setdefault(r.relation, []).append(i)
    field_index = len(META)
    for rel in schema.relations:
        idx = rows_of.get(rel.name, [])
        for ci in range(rel.arity):
            type_ = target.field(field_index).type
            field_index += 1
            if not idx:
                arrays.append(pa.nulls(n, type_))
                continue
            if len(idx) == n:
                values = [recs[i].values[ci] for i in idx]
            else:
                values = [None] * n
                for i in idx:
                    values[i] = recs[i].values[ci]
            arrays.append(pa.array(values, type_))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def make_parser(units: list[Unit], schema: Schema):
    """The mapInArrow function: reads unit ids, yields the units' records."""

    def parse(batches):
        from cumulus.ingest.fastpath import fast_batches

        codec_map = codecs(schema)
        target = arrow_schema(schema)
        for batch in batches:
            for unit_id in batch.column(0).to_pylist():
                unit = units[unit_id]
                relation = unit.files[0].relation
                if relation in codec_map:
                    fast = fast_batches(unit, codec_map[relation], target, schema.names.index(relation), len(META))
                    if fast is not None:
                        yield from fast
                        continue
                buf: list[tuple[int, int, Record]] = []
                for item in unit_records(unit, schema, codec_map):
                    buf.append(item)
                    if len(buf) >= BATCH_ROWS:
                        yield to_batch(unit.index, buf, schema, target)
                        buf = []
                if buf:
                    yield to_batch(unit.index, buf, schema, target)

    return parse


def parse_units(spark: SparkSession, units: list[Unit], schema: Schema) -> DataFrame:
    """The wide DataFrame of every record of the units (lazy; persist it before use)."""
    tasks = max(1, min(len(units), spark.sparkContext.defaultParallelism * 4))
    ids = spark.range(0, len(units), numPartitions=tasks)
    return ids.mapInArrow(make_parser(units, schema), spark_ddl(schema))


def relation_rows(parsed: DataFrame, schema: Schema, relation: Relation) -> DataFrame:
    """The valid rows of one relation: its columns by name, then the working columns."""
    from pyspark.sql import functions as F

    ri = schema.names.index(relation.name)
    cols = [F.col(value_column(ri, ci)).alias(c.name) for ci, c in enumerate(relation.columns)]
    return parsed.where((F.col("__relation") == relation.name) & F.col("__reason").isNull()).select(
        *cols, "__op", "__unit", "__pos", "__file", "__line", "__raw"
    )
