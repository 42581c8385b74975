"""The parse stage of the ingest job: units of input files become Spark DataFrames, parsed
in parallel by Python tasks (`mapInArrow`, one unit per task), one DataFrame per relation
(narrow: only that relation's columns) plus one for rows that name no relation of the
schema. Valid inserts in CSV, static DBToaster or Parquet files are converted by Arrow,
a chunk at a time (fastpath.py); everything else, and every chunk with a doubt, row by
row (formats.py).

Columns: the working columns (`__unit`, `__pos`, `__file`, `__line`, `__relation`,
`__op`, `__reason`, `__detail`, `__raw`), then the relation's columns under their own
names (`__` is a reserved prefix). A unit that holds several relations (a JSON Lines file
naming them per row, a DBToaster folder) is read once per relation it may hold; its rows'
positions do not depend on which relation is read (the other files of a DBToaster folder
are only scanned for their event-order numbers).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cumulus.ingest.fastpath import CHUNK_BYTES, Leave, fast_segments
from cumulus.ingest.formats import Codec, Record, codecs, dbtoaster_orders, read_file
from cumulus.ingest.plan import Unit
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, Column, Relation, Schema
from cumulus.spark.local import local_frame

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
META_NAMES = tuple(n for n, _ in META)


def spark_ddl(relation: Relation | None) -> str:
    cols = [f"`{n}` {t}" for n, t in META]
    if relation is not None:
        cols += [f"`{c.name}` {c.sql_type}" for c in relation.columns]
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


def arrow_schema(relation: Relation | None) -> pa.Schema:
    import pyarrow as pa

    meta_types = {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string()}
    fields = [pa.field(n, meta_types[t]) for n, t in META]
    if relation is not None:
        fields += [pa.field(c.name, _arrow_type(c)) for c in relation.columns]
    return pa.schema(fields)


def unit_records(
    unit: Unit, schema: Schema, codec_map: dict[str, Codec], only: str | None = None
) -> Iterator[tuple[int, int, Record]]:
    """(file index, pos, record) of a unit, in the unit's order (pos = 0, 1, ...). With
    `only`, the files of a DBToaster folder that hold another relation are only scanned
    for their rows' places (their records then carry no values)."""
    if not unit.interleave:
        pos = 0
        for file in unit.files:
            for rec in read_file(file.path, file.fmt, schema, file.relation, codec_map):
                if file.relation is not None and rec.relation != file.relation:
                    # The relation passes read a file for its relation only: keep every
                    # row of it in that pass (the readers already ensure this).
                    rec = rec._replace(relation=file.relation, op=0, values=None, reason=rec.reason or "unknown_relation",
                                       detail=rec.detail or f"the row is not of {file.relation}")
                yield file.index, pos, rec
                pos += 1
        return
    rank = {name: i for i, name in enumerate(schema.names)}
    items: list[tuple[int, Record]] = []
    for file in unit.files:
        if only is not None and file.relation is not None and file.relation != only and file.relation in codec_map:
            arity = codec_map[file.relation].relation.arity
            items += [
                (file.index, Record(file.relation, 0, None, line, None, order=order))
                for line, order in dbtoaster_orders(file.path, arity)
            ]
        else:
            items += [(file.index, rec) for rec in read_file(file.path, file.fmt, schema, file.relation, codec_map)]
    items.sort(key=lambda it: (it[1].order, rank.get(it[1].relation or "", len(rank)), it[0], it[1].line))
    for pos, (file_index, rec) in enumerate(items):
        yield file_index, pos, rec


def to_batch(unit: int, items: list[tuple[int, int, Record]], relation: Relation | None, target: pa.Schema) -> pa.RecordBatch:
    """Records (all of `relation`, or all of no relation of the schema) as one batch."""
    import pyarrow as pa

    recs = [r for _, _, r in items]
    n = len(recs)
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
    if relation is not None:
        valid = [i for i, r in enumerate(recs) if r.values is not None]
        for ci in range(relation.arity):
            type_ = target.field(len(META) + ci).type
            if len(valid) == n:
                values = [r.values[ci] for r in recs]
            else:
                values = [None] * n
                for i in valid:
                    values[i] = recs[i].values[ci]
            arrays.append(pa.array(values, type_))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def units_for(units: list[Unit], only: str | None) -> list[Unit]:
    """The units that may hold rows of relation `only` (None: of no relation)."""
    return [u for u in units if any(f.relation is None or f.relation == only for f in u.files)]


def unit_batches(
    unit: Unit, schema: Schema, codec_map: dict[str, Codec], only: str | None, target: pa.Schema,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The record batches of one relation's records in a unit (`only`; None: the rows
    that name no relation of the schema): the fast path's, and the row readers' for the
    rows it leaves."""
    relation = schema.relation(only) if only is not None else None
    fast = None
    if relation is not None and unit.files[0].relation == only:
        fast = fast_segments(unit, codec_map[only], target, chunk_bytes)
    if fast is None:
        yield from _row_batches(unit, unit_records(unit, schema, codec_map, only), codec_map, only, relation, target)
        return
    for segment in fast:
        if not isinstance(segment, Leave):
            yield segment
        elif segment.part is None:  # the rest of the file
            rest = (it for it in unit_records(unit, schema, codec_map, only) if it[1] >= segment.start)
            yield from _row_batches(unit, rest, codec_map, only, relation, target)
        else:  # the rows of one chunk, copied to a part file
            part = replace(unit, files=(replace(unit.files[0], path=str(segment.part)),))
            shifted = ((f, segment.start + pos, rec._replace(line=rec.line + segment.line_shift))
                       for f, pos, rec in unit_records(part, schema, codec_map, only))
            yield from _row_batches(unit, shifted, codec_map, only, relation, target)


def _row_batches(unit: Unit, items, codec_map, only: str | None, relation: Relation | None, target) -> Iterator:
    buf: list[tuple[int, int, Record]] = []
    for item in items:
        rel = item[2].relation
        mine = rel == only if only is not None else rel not in codec_map
        if not mine or (item[2].values is None and item[2].reason is None):
            continue
        buf.append(item)
        if len(buf) >= BATCH_ROWS:
            yield to_batch(unit.index, buf, relation, target)
            buf = []
    if buf:
        yield to_batch(unit.index, buf, relation, target)


def make_parser(units: list[Unit], schema: Schema, only: str | None):
    """The mapInArrow function of one relation's pass (`only`; None: the rows that name
    no relation of the schema): reads unit numbers, yields that relation's records."""

    def parse(batches):
        codec_map = codecs(schema)
        target = arrow_schema(schema.relation(only) if only is not None else None)
        for batch in batches:
            for number in batch.column(0).to_pylist():
                yield from unit_batches(units[number], schema, codec_map, only, target)

    return parse


def parse_relation(spark: SparkSession, units: list[Unit], schema: Schema, only: str | None) -> Parsed | None:
    """One relation's records (None: no unit may hold it): a lazy DataFrame parsed by
    Spark's Python tasks, one unit per task (a small batch on a local master is parsed in
    the driver instead: parse_rows, ingest/driver.py)."""
    mine = units_for(units, only)
    if not mine:
        return None
    ddl = spark_ddl(schema.relation(only) if only is not None else None)
    tasks = max(1, min(len(mine), spark.sparkContext.defaultParallelism * 4))
    ids = local_frame(spark, [(u.index,) for u in mine], "u INT").repartition(tasks)
    return Parsed(ids.mapInArrow(make_parser(units, schema, only), ddl))


def parse_rows(units: list[Unit], schema: Schema, only: str | None) -> list[tuple] | None:
    """One relation's records parsed here, as tuples of META then the relation's columns
    (None: no unit may hold it): what Spark's tasks would yield for its pass."""
    mine = units_for(units, only)
    if not mine:
        return None
    parse = make_parser(units, schema, only)
    return [row for batch in parse([pa_ids([u.index for u in mine])])
            for row in zip(*(c.to_pylist() for c in batch.columns), strict=True)]


@dataclass
class Parsed:
    """A relation's records parsed by Spark's tasks: the frame (META columns first, then
    the relation's)."""

    frame: DataFrame

    STATS = ("__file", "__relation", "__reason", "__op")  # grouped by; then n, lo, hi (positions)


def local_stats(rows) -> list:
    """Parsed rows (tuples, META first) counted per Parsed.STATS as the ingest's stats
    query counts them: Row objects with n, lo and hi (the first and last position)."""
    from pyspark.sql import Row

    at = [META_NAMES.index(n) for n in Parsed.STATS]
    pos = META_NAMES.index("__pos")
    groups: dict[tuple, list[int]] = {}
    for row in rows:
        n_lo_hi = groups.setdefault(tuple(row[i] for i in at), [0, row[pos], row[pos]])
        n_lo_hi[0] += 1
        n_lo_hi[1], n_lo_hi[2] = min(n_lo_hi[1], row[pos]), max(n_lo_hi[2], row[pos])
    stat = Row(*Parsed.STATS, "n", "lo", "hi")
    return [stat(*key, *values) for key, values in groups.items()]


def pa_ids(numbers: list[int]) -> pa.RecordBatch:
    """Unit numbers as the one-column batch a parser reads (as its Spark task would)."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(numbers, pa.int32())], names=["u"])


def relation_rows(records: DataFrame, relation: Relation) -> DataFrame:
    """The valid rows of a relation's records: its columns, then the working columns."""
    from pyspark.sql import functions as F

    return records.where(F.col("__reason").isNull()).select(
        *[F.col(f"`{c}`") for c in relation.column_names],
        "__op", "__unit", "__pos", "__file", "__line", "__raw",
    )
