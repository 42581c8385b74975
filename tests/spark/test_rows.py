"""Reading the small metadata tables through Spark (cumulus.store.rows.read_rows) keeps
what it read per snapshot: the same snapshot again runs no Spark job, appends since are
read alone, any other change (a delete, an overwrite) reads the table again, and the
rows are always those of the table."""

from __future__ import annotations

import pytest

from cumulus.errors import NoSuchTableError
from cumulus.store import commit
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.rows import read_rows

pytestmark = pytest.mark.spark


def _last_job(spark) -> int:
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(), default=-1)


def _rows(spark, table, where=None) -> list[tuple]:
    return sorted((r["k"], r["v"]) for r in read_rows(spark, table, where))


def test_rows_follow_appends_deletes_and_overwrites(spark, settings):
    table = f"{settings.catalog}.rows_test.kv"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog}.rows_test")
    spark.sql(f"CREATE OR REPLACE TABLE {table} (k INT, v STRING) USING iceberg")
    jobs = _last_job(spark)
    assert _rows(spark, table) == []  # no snapshot yet: nothing read
    assert _last_job(spark) == jobs

    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    assert _rows(spark, table) == [(1, "a"), (2, "b")]
    assert _rows(spark, table, {"k": 2}) == [(2, "b")]
    jobs = _last_job(spark)
    assert _rows(spark, table) == [(1, "a"), (2, "b")]  # the same snapshot: no job
    assert _rows(spark, table, {"k": 2}) == [(2, "b")]
    assert _last_job(spark) == jobs

    spark.sql(f"INSERT INTO {table} VALUES (3, 'c'), (2, 'bb')")  # an append: read alone
    assert _rows(spark, table) == [(1, "a"), (2, "b"), (2, "bb"), (3, "c")]
    assert _rows(spark, table, {"k": 2}) == [(2, "b"), (2, "bb")]

    spark.sql(f"DELETE FROM {table} WHERE v = 'b'")  # not an append: read again
    assert _rows(spark, table) == [(1, "a"), (2, "bb"), (3, "c")]
    assert _rows(spark, table, {"k": 2}) == [(2, "bb")]

    spark.sql(f"INSERT OVERWRITE {table} VALUES (9, NULL)")
    assert read_rows(spark, table, {"v": None}) == [{"k": 9, "v": None}]
    assert _rows(spark, table) == [(9, None)]

    # Rows handed out are copies: changing them changes nothing kept.
    read_rows(spark, table)[0]["k"] = 100
    assert _rows(spark, table) == [(9, None)]


def test_metadata_is_parsed_once_per_file_and_a_missing_table_is_named(spark, settings):
    table = f"{settings.catalog}.rows_test.meta"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog}.rows_test")
    spark.sql(f"CREATE OR REPLACE TABLE {table} (k INT) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    first = commit.table_metadata(spark, table)
    assert commit.table_metadata(spark, table) is first  # the same file: kept
    spark.sql(f"INSERT INTO {table} VALUES (2)")
    second = commit.table_metadata(spark, table)
    assert second["current-snapshot-id"] != first["current-snapshot-id"]
    assert len(second["snapshots"]) == 2
    jvm_free = commit.table_metadata(pyiceberg_catalog(settings), table)  # the same document, no JVM
    assert (jvm_free["current-snapshot-id"], len(jvm_free["snapshots"])) == (second["current-snapshot-id"], 2)
    with pytest.raises(NoSuchTableError, match="rows_test.nothing"):
        commit.table_metadata(spark, f"{settings.catalog}.rows_test.nothing")
