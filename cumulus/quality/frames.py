"""The Spark frames the suites of expectations/ run on: every table of a kind at the tag
`epoch-N`, stacked into one long frame (one row per stored row, a column naming the
table). One GX validation per kind instead of one per table: on Spark, GX pays several
Spark jobs per expectation whatever the data size, so per-table suites would cost minutes
per epoch for a few dozen maps; the stacked frame costs the same few jobs for any number
of tables, and a small one is validated in pandas instead (`for_gx`).

Keys and tuples become JSON objects (`to_json` with NULL fields kept): equal keys give
equal text, so uniqueness is NULL-safe, and a failing row reads well in a report."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from cumulus.m3.ast import Const
from cumulus.quality.facts import MapFacts
from cumulus.schema import STRING, Relation
from cumulus.spark.local import local_frame
from cumulus.sql.sqltext import spark_literal
from cumulus.store.fold import base_rows
from cumulus.store.maps import VALUE_TYPES, key_slots, key_type, value_slot
from cumulus.store.tables import Home, tag_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MAPS_SCHEMA = "map STRING, key STRING, value DOUBLE, kind STRING, null_key STRING"
BASE_SCHEMA = "relation STRING, tuple STRING, mult BIGINT"
EVENTS_SCHEMA = "relation STRING, op INT, epoch BIGINT, source_id INT, seq BIGINT, batch_id STRING"


def at_tag(spark: SparkSession, table: str, epoch: int) -> DataFrame:
    """`table` as of the tag `epoch-N` (the same as `VERSION AS OF 'epoch-N'`)."""
    return spark.read.format("iceberg").option("tag", tag_name(epoch)).load(table)


def json_of(columns: Sequence[str]) -> Column:
    """The columns as one JSON object, NULL fields kept ({} for no columns)."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit("{}")
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]), {"ignoreNullFields": "false"})


def _touched(frame: DataFrame, changed: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of `frame` whose `columns` equal (NULL-safe) those of a row of `changed`."""
    from pyspark.sql import functions as F

    if not columns:
        return frame.join(changed.limit(1).select(F.lit(1).alias("__one")), how="left_semi")
    keys = changed.select(*[F.col(f"`{c}`").alias(f"__t{i}") for i, c in enumerate(columns)]).distinct()
    cond = [F.col(f"`{c}`").eqNullSafe(F.col(f"__t{i}")) for i, c in enumerate(columns)]
    return frame.join(keys, cond, "left_semi")


def maps_frame(
    home: Home, maps: Iterable[MapFacts], epoch: int, *, touched: bool = False
) -> DataFrame:
    """One row per entry, as readers see it: a map's rows at the tag summed per key, zero
    sums left out (absent entries). Columns: map, key (JSON), value (the sum, as DOUBLE;
    NULL only if every row of the entry had none), kind (count | value), null_key (the
    first key column that is NULL although it cannot be, else NULL). `touched`: only the
    entries the epoch wrote a row to (a compaction through the epoch marks them all).

    Every map in one scan and one aggregation of maps.entries, as the maps are stored:
    rows grouped by map and key slots, each value slot summed in its own type (a decimal
    sum is exact, and zero only when it is), then each map's key named and its value
    slot chosen by a CASE on the map. One pass per map instead (a scan and two shuffles
    each) cost 15-20 s per epoch for the demo's 27 maps."""
    from pyspark.sql import functions as F

    maps = list(maps)
    if not maps:
        return local_frame(home.spark, [], MAPS_SCHEMA)
    tagged = at_tag(home.spark, home.tables.maps, epoch).where(F.col("map").isin([m.name for m in maps]))
    have = set(tagged.columns)
    users: dict[str, list[str]] = {}  # slot -> the maps with a key in it
    types: dict[str, str] = {}  # slot -> its M3 type
    for m in maps:
        for slot, type_ in zip(key_slots(m.info), m.info.key_types, strict=True):
            users.setdefault(slot, []).append(m.name)
            types[slot] = type_
    slots = sorted(users)

    def named(m: MapFacts) -> dict[str, str]:  # key column -> its slot
        return dict(zip(m.keys, key_slots(m.info), strict=True))

    def case(text) -> str:
        return "CASE `map` " + " ".join(f"WHEN {_sql_text(m.name)} THEN {text(m)}" for m in maps) + " END"

    # A map's own slots only (the others are NULL in its rows; a CASE makes sure).
    rows = tagged.selectExpr(
        "`map`", "epoch", *(f"`{value_slot(t)}`" for t in VALUE_TYPES),
        *(f"CASE WHEN `map` IN ({', '.join(map(_sql_text, users[s]))}) THEN `{s}` END AS `{s}`" if s in have
          else f"CAST(NULL AS {key_type(types[s]).simpleString()}) AS `{s}`" for s in slots),
    )
    groups = ["map", *slots]
    entries = rows.groupBy(*groups).agg(
        *(F.sum(value_slot(t)).alias(value_slot(t)) for t in VALUE_TYPES), F.count(F.lit(1)).alias("__rows"))
    if touched:
        entries = _touched(entries, rows.where(F.col("epoch") == epoch), groups)
    value = case(lambda m: f"`{value_slot(m.value_type)}`")
    null_key = case(lambda m: "COALESCE(" + ", ".join(
        f"CASE WHEN `{named(m)[k]}` IS NULL THEN {_sql_text(k)} END" for k in m.not_null_keys) + ")"
        if m.not_null_keys else "CAST(NULL AS STRING)")
    key = case(lambda m: "to_json(named_struct(" + ", ".join(
        f"{_sql_text(k)}, `{slot}`" for k, slot in named(m).items()) + "), map('ignoreNullFields', 'false'))"
        if m.keys else "'{}'")
    return entries.where(f"`__rows` > 0 AND (({value}) IS NULL OR ({value}) != 0)").selectExpr(
        "`map`", f"{key} AS `key`", f"CAST({value} AS DOUBLE) AS `value`",
        f"{case(lambda m: _sql_text(m.kind))} AS `kind`", f"{null_key} AS `null_key`")


def _sql_text(text: str) -> str:
    return spark_literal(Const(text, STRING))


def base_frame(
    home: Home, relations: Iterable[Relation], epoch: int, *, touched: bool = False
) -> DataFrame:
    """Columns: relation, tuple (JSON of the relation's columns), mult: one row per tuple
    stored with a nonzero count (the fold layers summed, cumulus.store.fold.base_rows).
    `touched`: only the tuples the epoch's events changed."""
    from pyspark.sql import functions as F

    parts = []
    for r in relations:
        rows = base_rows(home.spark, home.tables.base(r.name), list(r.column_names), tag_name(epoch), live=False)
        if touched:
            changed = home.spark.table(home.tables.events(r.name)).where(F.col("epoch") == epoch)
            rows = _touched(rows, changed, list(r.column_names))
        parts.append(rows.select(
            F.lit(r.name).alias("relation"),
            json_of(r.column_names).alias("tuple"),
            F.col("mult").cast("bigint").alias("mult"),
        ))
    return _stack(home.spark, parts, BASE_SCHEMA)


def events_frame(home: Home, relations: Iterable[Relation], epoch: int) -> DataFrame:
    """Columns: relation, op, epoch, source_id, seq, batch_id of every event of `epoch`.
    events.* is not tagged; its epoch partition no longer changes once the epoch is sealed."""
    from pyspark.sql import functions as F

    parts = [
        home.spark.table(home.tables.events(r.name))
        .where(F.col("epoch") == epoch)
        .select(F.lit(r.name).alias("relation"), "op", "epoch", "source_id", "seq", "batch_id")
        for r in relations
    ]
    return _stack(home.spark, parts, EVENTS_SCHEMA)


def materialize(frame: DataFrame) -> DataFrame:
    """The frame read once and kept: GX runs several Spark jobs per expectation, and
    without this each of them would plan and scan every stacked table again. Fewer
    partitions than tables (a stacked frame has at least one per table) keep the many
    small jobs cheap (a coalesce never adds partitions); `release` unpersists it."""
    kept = frame.coalesce(frame.sparkSession.sparkContext.defaultParallelism).persist()
    kept.count()
    return kept


def for_gx(frame: DataFrame, local_rows: int):
    """The frame as GX should validate it: as pandas when it has at most `local_rows`
    rows (GX's pandas engine runs a suite over it in a fraction of a second; its Spark
    engine runs several Spark jobs per expectation, about 4 s per suite here on an epoch's
    few thousand rows), else materialized (0: always). One Spark job decides: the first
    `local_rows` + 1 rows, each with a flag for a NaN in a floating column. The checks are
    the same columns' expectations either way, with one difference: pandas holds a NULL
    of a floating column as NaN, so it counts a NaN as missing where Spark counts it as a
    value. A frame with a NaN stays on Spark, so both engines give the same outcome. The
    caller `release`s what it gets."""
    from pyspark.sql import functions as F

    if local_rows > 0:
        floating = [F.isnan(F.col(f"`{f.name}`")) for f in frame.schema.fields
                    if f.dataType.typeName() in ("double", "float")]
        nan = functools.reduce(lambda a, b: a | b, floating) if floating else F.lit(False)
        head = frame.select("*", nan.alias("__nan")).limit(local_rows + 1).toPandas()
        if len(head) <= local_rows and not head["__nan"].any():
            return head.drop(columns="__nan")
    return materialize(frame)


def is_local(frame) -> bool:
    """True for a pandas frame (what `for_gx` gives for a small frame), False for Spark."""
    return type(frame).__module__.startswith("pandas")


def column_values(frame, column: str) -> list:
    """The distinct values of a column of what `for_gx` gave (pandas or Spark)."""
    if is_local(frame):
        return list(frame[column].unique())
    return [row[0] for row in frame.select(column).distinct().collect()]


def release(frame) -> None:
    """Unpersist a frame `for_gx` kept on Spark (a pandas frame holds nothing)."""
    if not is_local(frame):
        frame.unpersist()


def _stack(spark: SparkSession, parts: list[DataFrame], schema: str) -> DataFrame:
    if not parts:
        return local_frame(spark, [], schema)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out
