"""The base relations' statistics (rows, distinct values per column) as of a closed epoch,
for the state estimates of `view add` and `cumulus explain --home`
(cumulus/sql/estimate.py). One Spark job per relation: SUM(mult) and
approx_count_distinct of the columns asked for, over base.<rel> at the epoch's tag."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cumulus.sql.estimate import Statistics
from cumulus.store.tables import Home, tag_name


def base_statistics(home: Home, columns: Mapping[str, Iterable[str]],
                    epoch: int) -> Statistics:
    """Statistics of `columns` (relation -> its columns) from base.* at epoch `epoch`'s tag.
    A tuple's layers are counted once each: the distinct counts can only be over."""
    from pyspark.sql import functions as F

    rows: dict[str, int] = {}
    distinct: dict[tuple[str, str], int] = {}
    for rel, cols in columns.items():
        cols = sorted(set(cols))
        frame = home.spark.read.format("iceberg").option("tag", tag_name(epoch)).load(home.tables.base(rel))
        got = frame.agg(F.coalesce(F.sum("mult"), F.lit(0)).alias("__rows"),
                        *(F.approx_count_distinct(c).alias(c) for c in cols)).first()
        rows[rel] = int(got["__rows"])
        distinct.update({(rel, c): int(got[c]) for c in cols})
    return Statistics(rows, distinct, f"base.* at epoch {epoch}")
