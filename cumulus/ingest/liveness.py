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
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from cumulus.schema import Relation

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _same_tuple(left: str, right: str, keys: list[str]) -> Column:
    from pyspark.sql import functions as F

    return reduce(
        lambda a, b: a & b,
        [F.col(f"{left}.`{k}`").eqNullSafe(F.col(f"{right}.`{k}`")) for k in keys],
    )


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
    deleted = batch.where(F.col("__op") < 0).select(*keys).distinct()
    prior = (
        base.select(*keys, F.col("mult").cast("bigint").alias("__n"))
        .unionByName(events.select(*keys, F.col("op").cast("bigint").alias("__n")))
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
