"""Smoke test of the platform: Spark writes Iceberg snapshots and a tag into the JDBC
catalog; Spark and PyIceberg (no JVM) both read the tag back; `cumulus sql` prints it."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cumulus.cli import main
from cumulus.config import HOME_MARKER
from cumulus.store.catalog import pyiceberg_catalog

pytestmark = pytest.mark.spark

FIRST = [(1, "a"), (2, "b")]
SECOND = [(3, "c")]


@pytest.fixture(scope="module")
def tagged_table(spark):
    """smoke.events with two snapshots; the first tagged `epoch-1`."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS smoke")
    spark.sql("CREATE OR REPLACE TABLE smoke.events (k INT, v STRING) USING iceberg")
    spark.sql("INSERT INTO smoke.events VALUES (1, 'a'), (2, 'b')")
    spark.sql("ALTER TABLE smoke.events CREATE TAG `epoch-1`")
    spark.sql("INSERT INTO smoke.events VALUES (3, 'c')")
    return "smoke.events"


def test_spark_reads_tag_and_main(spark, tagged_table):
    at_tag = spark.sql(f"SELECT k, v FROM {tagged_table} VERSION AS OF 'epoch-1' ORDER BY k")
    assert [tuple(r) for r in at_tag.collect()] == FIRST
    latest = spark.sql(f"SELECT k, v FROM {tagged_table} ORDER BY k")
    assert [tuple(r) for r in latest.collect()] == FIRST + SECOND
    refs = {r.name: r.type for r in spark.sql(f"SELECT * FROM {tagged_table}.refs").collect()}
    assert refs == {"main": "BRANCH", "epoch-1": "TAG"}


def test_pyiceberg_reads_the_same_tag(spark, settings, tagged_table):
    table = pyiceberg_catalog(settings).load_table(tagged_table)
    snapshot = table.snapshot_by_name("epoch-1")
    assert snapshot is not None
    spark_id = spark.sql(
        f"SELECT snapshot_id FROM {tagged_table}.refs WHERE name = 'epoch-1'"
    ).first()[0]
    assert snapshot.snapshot_id == spark_id
    rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().sort_by("k").to_pylist()
    assert [(r["k"], r["v"]) for r in rows] == FIRST
    assert table.scan().to_arrow().num_rows == len(FIRST + SECOND)


QUERY = "SELECT k, v, CAST(k * 1.5 AS DECIMAL(5,2)) AS d, NULL AS n FROM smoke.events ORDER BY k"


@pytest.fixture
def cli_home(settings):
    """The session's home as the CLI takes it: commands need an initialized home (one with
    the schema.sql that `cumulus init` writes first); these tables were made by SQL."""
    marker = settings.home / HOME_MARKER
    if not marker.exists():
        marker.write_text("CREATE TABLE smoke (k INT NOT NULL, v VARCHAR);\n")
    return settings


def _cli(settings, capsys, *args: str) -> str:
    assert main(["--home", str(settings.home), "sql", *args]) == 0
    return capsys.readouterr().out


def test_cli_sql_formats(spark, cli_home, tagged_table, capsys):
    settings = cli_home
    table = _cli(settings, capsys, QUERY).splitlines()
    assert table[0].split(" | ") == ["k", "v", "   d", "   n"]
    assert table[2] == "1 | a | 1.50 | NULL"
    assert table[-1] == "(3 rows)"
    assert len({len(line) for line in table[:-1]}) == 1  # aligned columns

    rows = list(csv.reader(io.StringIO(_cli(settings, capsys, QUERY, "--format", "csv"))))
    assert rows == [
        ["k", "v", "d", "n"],
        ["1", "a", "1.50", ""],
        ["2", "b", "3.00", ""],
        ["3", "c", "4.50", ""],
    ]

    lines = _cli(settings, capsys, QUERY, "--format", "json").splitlines()
    assert [json.loads(line) for line in lines][0] == {"k": 1, "v": "a", "d": 1.5, "n": None}
    assert lines[1] == '{"k":2,"v":"b","d":3.00,"n":null}'  # decimals exactly as stored


def test_cli_sql_reports_errors(spark, cli_home, capsys):
    settings = cli_home
    assert main(["--home", str(settings.home), "sql", "SELECT * FROM smoke.missing"]) == 2
    assert "TABLE_OR_VIEW_NOT_FOUND" in capsys.readouterr().err
