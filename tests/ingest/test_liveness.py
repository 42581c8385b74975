"""The delete check reads only the data files that can hold the deleted tuples, and
judges the same on the driver (small batches: over Spark's reads, and over PyIceberg's
for a batch parsed in the driver), by Spark with that lookup and by Spark without it
(NULLs, a batch's own inserts, a second delete of the last copy)."""

from __future__ import annotations

import pytest

from cumulus.engine.metrics import StageMeter
from cumulus.ingest import liveness
from cumulus.schema import INT, STRING, Column, Relation
from cumulus.store.catalog import shared_catalog

REL = Relation("lv", (Column("k", INT), Column("v", STRING)))
FILES = 4  # base holds keys 0..3999, one data file per thousand


@pytest.fixture(scope="module")
def tables(spark, settings):
    ns = f"{settings.catalog}.liveness"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE OR REPLACE TABLE {ns}.base (k BIGINT, v STRING, mult INT) USING iceberg")
    spark.sql(f"CREATE OR REPLACE TABLE {ns}.events (k BIGINT, v STRING, op INT) USING iceberg")
    for f in range(FILES):
        spark.sql(
            f"INSERT INTO {ns}.base SELECT /*+ COALESCE(1) */ id, concat('v', id), 1 "
            f"FROM range({f * 1000}, {(f + 1) * 1000})"
        )
    spark.sql(f"INSERT INTO {ns}.base VALUES (NULL, 'n', 1)")
    spark.sql(f"INSERT INTO {ns}.events VALUES (4000, 'v4000', 1)")  # committed, not folded
    return spark.table(f"{ns}.base"), spark.table(f"{ns}.events")


def batch(spark, rows):
    """(k, v, op) rows in arrival order."""
    return spark.createDataFrame(
        [(k, v, op, 0, pos) for pos, (k, v, op) in enumerate(rows)],
        "k BIGINT, v STRING, __op INT, __unit INT, __pos INT",
    )


ROWS = [
    (5, "v5", -1),  # alive in base
    (5, "v5", -1),  # its only copy is gone: rejected
    (2500, "other", -1),  # no such tuple: rejected
    (4000, "v4000", -1),  # alive through a committed event
    (6000, "v6000", 1),
    (6000, "v6000", -1),  # alive through the batch's own insert
    (None, "n", -1),  # NULL key, alive in base
    (None, "m", -1),  # rejected
]
REJECTED = [(5, "v5", 1), (2500, "other", 2), (None, "m", 7)]


def rejected(frame):
    return sorted(((r["k"], r["v"], r["__pos"]) for r in frame.collect()), key=lambda r: r[2])


WAYS = {  # (LOOKUP_LIMIT, DRIVER_LIMIT): judged on the driver, by Spark over the lookup, by Spark over everything
    "driver": (liveness.LOOKUP_LIMIT, liveness.DRIVER_LIMIT),
    "lookup": (liveness.LOOKUP_LIMIT, 0),
    "full-scan": (0, 0),
}


def judged(spark, monkeypatch, way, rows, base, events):
    monkeypatch.setattr(liveness, "LOOKUP_LIMIT", WAYS[way][0])
    monkeypatch.setattr(liveness, "DRIVER_LIMIT", WAYS[way][1])
    return rejected(liveness.not_alive(batch(spark, rows), REL, base, events))


def judged_by_pyiceberg(settings, rows):
    """The judgment of a batch parsed in the driver: its copies read through PyIceberg, no Spark job."""
    valid = [{"k": k, "v": v, "__op": op, "__unit": 0, "__pos": pos} for pos, (k, v, op) in enumerate(rows)]
    found = liveness.not_alive_in_driver(shared_catalog(settings), REL, valid, "liveness.base", "liveness.events")
    assert found is not None, "judged by Spark after all"
    return sorted(((valid[pos]["k"], valid[pos]["v"], pos) for _, pos in found), key=lambda r: r[2])


@pytest.mark.parametrize("way", list(WAYS))
def test_the_same_deletes_are_rejected_each_way(spark, tables, monkeypatch, way):
    base, events = tables
    assert judged(spark, monkeypatch, way, ROWS, base, events) == REJECTED


def test_the_same_deletes_are_rejected_in_the_driver_through_pyiceberg(settings, tables):
    assert judged_by_pyiceberg(settings, ROWS) == REJECTED


def test_random_batches_are_judged_alike_on_the_driver_and_by_spark(spark, settings, tables, monkeypatch):
    """Inserts and deletes (some of several copies, NULL keys, tuples only the batch has)
    in random order: the driver's walk (over Spark's reads and over PyIceberg's) and
    Spark's windows reject the same rows."""
    import random

    base, events = tables
    pick = random.Random(2611)
    for _ in range(4):
        pool = [(k, f"v{k}") for k in pick.sample(range(0, 4100), 6)] + [(None, "n"), (7000, "x"), (7001, "y")]
        rows = [(*pick.choice(pool), pick.choice((1, -1, -1))) for _ in range(40)]
        driver = judged(spark, monkeypatch, "driver", rows, base, events)
        assert driver == judged_by_pyiceberg(settings, rows), rows  # (the limits as they are: the driver's way)
        assert driver == judged(spark, monkeypatch, "lookup", rows, base, events), rows
        assert driver, "the batch rejects nothing: it tests nothing"


def test_deletes_in_one_key_range_read_one_data_file(spark, tables):
    base, events = tables
    meter = StageMeter(spark)
    base.select("k", "v", "mult").collect()
    whole = meter.read().bytes_read

    deletes = [(k, f"v{k}", -1) for k in range(1200, 1300)] + [(1250, "v1250", -1)]
    meter = StageMeter(spark)
    found = rejected(liveness.not_alive(batch(spark, deletes), REL, base, events))
    read = meter.read().bytes_read
    assert found == [(1250, "v1250", 100)]
    assert 0 < read < whole / (FILES - 1), (read, whole)
