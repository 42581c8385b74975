"""Rows from the driver (cumulus.spark.local.local_frame) are the rows createDataFrame
makes, value for value, but planned as a LocalRelation that no Python worker reads; a
NaN, which pandas cannot hold apart from NULL, keeps its way through createDataFrame."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from cumulus.spark.local import local_frame

pytestmark = pytest.mark.spark

DDL = ("i INT, b BIGINT, s STRING, d DOUBLE, m DECIMAL(15,2), w DECIMAL(38,10), day DATE, at TIMESTAMP, "
       "naive TIMESTAMP, ok BOOLEAN")
ROWS = [
    (1, 2**62 + 1, "it's", 1.5, Decimal("12.34"), Decimal("1234567890123456789012345678.0123456789"),
     dt.date(1992, 1, 2), dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC), dt.datetime(2026, 1, 1, 12), True),
    (None, None, None, None, None, None, None, None, None, None),
    (-5, -(2**63), "", float("inf"), Decimal("-0.01"), Decimal("0"), dt.date(9999, 12, 31),
     dt.datetime(1970, 1, 1, tzinfo=dt.UTC), dt.datetime(2000, 2, 29, 23, 59, 59), False),
]


def _plan(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


def test_the_rows_of_create_data_frame_as_a_local_relation(spark):
    local, reference = local_frame(spark, ROWS, DDL), spark.createDataFrame(ROWS, DDL)
    assert local.schema == reference.schema
    assert local.collect() == reference.collect()
    assert _plan(local).startswith("LocalRelation")
    assert local.where("i = 1").select("w").first()[0] == Decimal("1234567890123456789012345678.0123456789")


def test_a_struct_schema_and_no_rows(spark):
    schema = spark.createDataFrame(ROWS, DDL).schema
    assert local_frame(spark, ROWS[:1], schema).collect() == spark.createDataFrame(ROWS[:1], schema).collect()
    empty = local_frame(spark, [], DDL)
    assert empty.schema == schema and empty.collect() == [] and empty.rdd.getNumPartitions() == 0


def test_nan_is_not_null(spark):
    rows = local_frame(spark, [(1, float("nan")), (2, None)], "i INT, d DOUBLE").orderBy("i").collect()
    assert math.isnan(rows[0]["d"]) and rows[1]["d"] is None
