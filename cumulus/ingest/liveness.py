"""The one validation that needs table state: a delete must find a live copy of its tuple.

Alive is judged in commit order, counting multiplicities: the tuple's `mult` in
base.<rel> (folded epochs), plus the ops of every committed event of later epochs, plus
the batch's own earlier rows in seq order. A rejected delete does not count. Per tuple
this is the recursion c_k = max(c_{k-1} + op_k, 0) from c_0 = the prior count a; its
closed form lets Spark do it with two window passes over only the rows that touch a
deleted tuple:

    level_k = a + S_k                  (S_k: running sum of op, rejected rows included)
    delete k is rejected  <=>  level_k < min(0, min_{j<k} level_j)

Judging in commit order keeps every multiplicity >= 0 at every commit and at close. A
replay in version order (source priority first) can pass through a negative count when
a lower-priority source deletes, in a later batch of the same epoch, a tuple a
higher-priority source inserted; the maps are linear, so the state at close is the same.

The check reads only what can hold a deleted tuple: when the batch deletes at most
LOOKUP_LIMIT distinct tuples, their values are pushed into the scans of base.<rel> and of
the events as IN filters on the relation's leading columns, which Iceberg uses to skip
every data file (and Parquet row group) whose column bounds exclude them. How much that
skips depends on the layout: deletes clustered in key order (recent rows, a range of
orders) read a few files; deletes scattered over the whole key range still touch most.

Two ways to the same judgment. A small batch (a micro-batch of the warm engine: at most
DRIVER_LIMIT deleted tuples, whose filtered copies and batch rows number at most
DRIVER_ROWS) is judged on the driver: the filtered rows are collected (a few small Spark
jobs, no shuffle; none for a batch parsed in the driver, whose copies PyIceberg reads:
not_alive_in_driver) and the levels computed in Python. Any other batch is judged by
Spark with two window passes (joins, aggregation and windows: a dozen jobs, each a fixed
cost of 0.1-0.2 s, which was most of a micro-batch's ingest).
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from cumulus.schema import DATE, FLOAT, Relation
from cumulus.spark.local import local_frame

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyspark.sql import Column, DataFrame

# Above this many distinct deleted tuples the scans are not filtered: the IN lists would
# cost more to evaluate than they save.
LOOKUP_LIMIT = 20_000
# Filter on at most this many columns, the leading ones (keys lead by convention, and the
# data lands in their order), each filter being a hash lookup on every scanned row.
LOOKUP_COLUMNS = 2
# At most this many distinct deleted tuples, and this many rows (their copies in base and
# the events, the batch's rows of them), are judged on the driver (_judge_on_driver).
DRIVER_LIMIT = 2_000
DRIVER_ROWS = 50_000


def _same_tuple(left: str, right: str, keys: list[str]) -> Column:
    from pyspark.sql import functions as F

    return reduce(
        lambda a, b: a & b,
        [F.col(f"{left}.`{k}`").eqNullSafe(F.col(f"{right}.`{k}`")) for k in keys],
    )


def lookup_filter(relation: Relation, deleted: list) -> Column | None:
    """A filter that keeps every copy of the `deleted` tuples (Rows of the relation's
    columns) and that Iceberg can prune files with: IN lists on the leading columns that
    hold no NULL (IN never matches NULL) and are not floating point (NaN has no bounds)."""
    from pyspark.sql import functions as F

    conditions = [F.col(f"`{column.name}`").isin([_literal(v, column) for v in sorted(values)])
                  for column, values in _lookup_values(relation, deleted)]
    return reduce(lambda a, b: a & b, conditions) if conditions else None


def _lookup_values(relation: Relation, deleted: list) -> list[tuple]:
    """The leading columns a lookup filters on (at most LOOKUP_COLUMNS, none holding NULL
    or floating point) and the deleted tuples' values of each."""
    found = []
    for column in relation.columns:
        if len(found) == LOOKUP_COLUMNS:
            break
        values = {row[column.name] for row in deleted}
        if column.type != FLOAT and None not in values:
            found.append((column, values))
    return found


def _literal(value, column):
    """A value as a Spark literal. Dates go as ISO text cast to DATE: Py4J sends a Python
    date through strftime("%Y-%m-%d"), which writes year 322 as "322" and the JVM refuses
    it (IllegalArgumentException)."""
    from pyspark.sql import functions as F

    return F.lit(value.isoformat()).cast("date") if column.type == DATE else value


def not_alive(
    batch: DataFrame, relation: Relation, base: DataFrame, events: DataFrame
) -> DataFrame:
    """The batch's deletes that find no live copy.

    batch: the relation's valid rows of the batch (columns, `__op`, `__unit`, `__pos`,
    ...); base: base.<rel>; events: the committed events not yet folded into base.
    Returns the rejected rows with the batch's columns."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = list(relation.column_names)
    deleted = batch.where(F.col("__op") < 0).select(*keys)
    rows = deleted.limit(LOOKUP_LIMIT + 1).collect()  # no shuffle: most batches delete few rows
    tuples = list(_distinct(rows, keys).values()) if len(rows) <= LOOKUP_LIMIT else deleted.distinct().limit(LOOKUP_LIMIT + 1).collect()
    if not tuples:
        return batch.where(F.lit(False))
    if len(tuples) <= LOOKUP_LIMIT:
        deleted = local_frame(batch.sparkSession, tuples, deleted.schema)
        where = lookup_filter(relation, tuples)
        if where is not None:
            base, events = base.where(where), events.where(where)
            if len(tuples) <= DRIVER_LIMIT:
                judged = _judge_on_driver(batch, keys, base, events, where, tuples)
                if judged is not None:
                    return judged
    else:
        deleted = deleted.distinct()
    prior = (
        _copies(base, events, keys)
        .alias("p")
        .join(deleted.alias("d"), _same_tuple("p", "d", keys), "left_semi")
        .groupBy(*keys)
        .agg(F.sum("__n").alias("__a"))
    )
    touched = batch.alias("b").join(deleted.alias("d"), _same_tuple("b", "d", keys), "left_semi")
    with_prior = (
        touched.alias("b")
        .join(prior.alias("p"), _same_tuple("b", "p", keys), "left")
        .select("b.*", F.coalesce(F.col("p.__a"), F.lit(0)).alias("__a"))
    )
    order = Window.partitionBy(*keys).orderBy("__unit", "__pos")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    levels = with_prior.withColumn("__level", F.col("__a") + F.sum("__op").over(running))
    levels = levels.withColumn("__low", F.least(F.lit(0), F.coalesce(F.min("__level").over(before), F.lit(0))))
    rejected = levels.where((F.col("__op") < 0) & (F.col("__level") < F.col("__low")))
    return rejected.drop("__a", "__level", "__low")


def _copies(base: DataFrame, events: DataFrame, keys: list[str]) -> DataFrame:
    """The tuples' counts before the batch, as rows (keys, `__n`) to sum: base's `mult`
    and the committed events' `op`."""
    from pyspark.sql import functions as F

    return base.select(*keys, F.col("mult").cast("bigint").alias("__n")).unionByName(
        events.select(*keys, F.col("op").cast("bigint").alias("__n")))


_NAN = object()  # NaN as a key part: Spark matches NaN with NaN, Python's == does not


def _key(row, keys: list[str]) -> tuple:
    """A tuple's values as a dict key that matches as eqNullSafe does (NULL with NULL,
    NaN with NaN, -0.0 with 0.0)."""
    return tuple(_NAN if isinstance(v, float) and v != v else v for v in (row[k] for k in keys))


def _distinct(rows: list, keys: list[str]) -> dict[tuple, object]:
    found: dict[tuple, object] = {}
    for row in rows:
        found.setdefault(_key(row, keys), row)
    return found


def _judge_on_driver(
    batch: DataFrame, keys: list[str], base: DataFrame, events: DataFrame, where: Column, tuples: list
) -> DataFrame | None:
    """not_alive's judgment for a small batch, on the driver: the copies of the deleted
    `tuples` in base and the events (already filtered by `where`, the IN lists) and the
    batch's rows of them are collected and matched exactly here, then each tuple's rows
    are walked in (unit, position) order with the same closed form as Spark's windows.
    None when the filtered rows are more than DRIVER_ROWS (Spark judges instead)."""
    from pyspark.sql import functions as F

    wanted = {_key(t, keys) for t in tuples}
    prior_rows = _copies(base, events, keys).limit(DRIVER_ROWS + 1).collect()
    touched = batch.where(where).select(*keys, "__op", "__unit", "__pos").limit(DRIVER_ROWS + 1).collect()
    if len(prior_rows) > DRIVER_ROWS or len(touched) > DRIVER_ROWS:
        return None
    rejected = _walk(prior_rows, touched, keys, wanted)
    if not rejected:
        return batch.where(F.lit(False))
    at = local_frame(batch.sparkSession, sorted(rejected), batch.select("__unit", "__pos").schema)
    return batch.join(F.broadcast(at), ["__unit", "__pos"], "left_semi").select(*batch.columns)


def _walk(prior_rows, touched, keys: list[str], wanted: set[tuple]) -> set[tuple[int, int]]:
    """The (unit, position) of each rejected delete: `prior_rows`, the copies of the
    deleted tuples before the batch (keys and `__n`, to sum); `touched`, the batch's rows
    (keys, `__op`, `__unit`, `__pos`); each tuple of `wanted` walked in (unit, position)
    order with the closed form of the module doc."""
    prior: dict[tuple, int] = {}
    for row in prior_rows:
        key = _key(row, keys)
        if key in wanted:
            prior[key] = prior.get(key, 0) + row["__n"]
    runs: dict[tuple, list] = {}
    for row in touched:
        key = _key(row, keys)
        if key in wanted:
            runs.setdefault(key, []).append(row)
    rejected = set()
    for key, rows in runs.items():
        level, low = prior.get(key, 0), 0  # level_k = a + S_k; low = min(0, level_j for j < k)
        for row in sorted(rows, key=lambda r: (r["__unit"], r["__pos"])):
            level += row["__op"]
            if row["__op"] < 0 and level < low:
                rejected.add((row["__unit"], row["__pos"]))
            low = min(low, level)
    return rejected


def not_alive_in_driver(catalog: Catalog, relation: Relation, batch: list[dict], base: str, events: str,
                        unfolded: BooleanExpression | None = None) -> set[tuple[int, int]] | None:
    """not_alive's judgment with no Spark job, for a batch parsed in the driver
    (ingest/driver.py): `batch`, the relation's valid rows of the batch as dicts (its
    columns, `__op`, `__unit`, `__pos`); the copies of the deleted tuples in the tables
    `base` and `events` (PyIceberg names; of the events, those `unfolded` keeps: the
    epochs not folded into base), read through PyIceberg with lookup_filter's filter. The
    (unit, position) of each rejected delete; None when the batch deletes more than
    DRIVER_LIMIT distinct tuples or more than DRIVER_ROWS rows are read (then Spark
    judges, as not_alive)."""
    from pyiceberg.expressions import AlwaysTrue, And

    keys = list(relation.column_names)
    tuples = _distinct([r for r in batch if r["__op"] < 0], keys)
    if not tuples:
        return set()
    if len(tuples) > DRIVER_LIMIT:
        return None
    where = lookup_expression(relation, list(tuples.values())) or AlwaysTrue()
    prior: list[dict] = []
    for table, row_filter, count in ((base, where, "mult"),
                                     (events, where if unfolded is None else And(unfolded, where), "op")):
        rows = catalog.load_table(table).scan(row_filter=row_filter, selected_fields=(*keys, count),
                                              limit=DRIVER_ROWS + 1).to_arrow().to_pylist()
        prior += [{**row, "__n": row[count]} for row in rows]
    if len(prior) > DRIVER_ROWS:
        return None
    return _walk(prior, batch, keys, set(tuples))


def lookup_expression(relation: Relation, deleted: list) -> BooleanExpression | None:
    """lookup_filter as a PyIceberg row filter: the same columns, the same values."""
    from pyiceberg.expressions import And, In

    conditions = [In(column.name, values) for column, values in _lookup_values(relation, deleted)]
    return reduce(And, conditions) if conditions else None
