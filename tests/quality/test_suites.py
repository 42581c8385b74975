"""The suites of expectations/ on hand-made frames: each kind of damage a closed epoch
must not show is caught by the check named for it, on exactly the rows planted, next to
good rows that nothing flags (a suite that cannot fail, or fails on good rows, is
useless). Each on both of GX's engines: an epoch's frame of at most validation_local_rows
rows is validated in pandas, a larger one on Spark (frames.for_gx)."""

from __future__ import annotations

import pytest

from cumulus.quality import frames
from cumulus.quality.spec import load_suites


@pytest.fixture(scope="module")
def gx_run(tmp_path_factory):
    """A fresh GX run (a home of its own: context, site) per validation: a run validates
    each suite once."""
    from cumulus.quality.gxrun import GxRun

    return lambda: GxRun(tmp_path_factory.mktemp("home"), "epoch-0")


ENGINES = pytest.mark.parametrize("local_rows", [10_000, 0], ids=["pandas", "spark"])


def _run(spark, gx_run, suite: str, rows: list[tuple], schema: str, local_rows: int, parameters=None) -> dict:
    given = frames.for_gx(spark.createDataFrame(rows, schema), local_rows)
    try:
        assert type(given).__module__.startswith("pandas") == (local_rows > 0)
        outcome = gx_run().validate(load_suites()[suite], given, parameters)
    finally:
        frames.release(given)
    return {c.name: c for c in outcome.checks}


def _failed(checks: dict) -> dict[str, int]:
    return {name: c.unexpected_count for name, c in checks.items() if not c.success}


@ENGINES
def test_the_maps_suite_names_each_kind_of_damage(spark, gx_run, local_rows) -> None:
    good = [
        ("m_count", '{"k":1}', 2.0, "count", None),
        ("m_count", '{"k":null}', 1.0, "count", None),  # a NULL key where NULL is allowed
        ("m_sum", '{"k":1}', -4.5, "value", None),  # sums may be negative
        ("m_one", "{}", 7.0, "count", None),
    ]
    bad = good + [
        ("m_count", '{"k":3}', -1.0, "count", None),  # a negative count
        ("m_join", '{"o_id":null}', 1.0, "count", "o_id"),  # NULL in a join key
        ("m_sum", '{"k":4}', None, "value", None),  # no value
    ]
    checks = _run(spark, gx_run, "maps", bad, frames.MAPS_SCHEMA, local_rows)
    assert _failed(checks) == {
        "maps.counts_not_negative": 1,
        "maps.keys_not_null": 1,
        "maps.value_present": 1,
    }
    assert checks["maps.counts_not_negative"].examples == [{"map": "m_count", "key": '{"k":3}', "value": -1.0}]


@ENGINES
def test_the_base_and_events_suites_name_each_kind_of_damage(spark, gx_run, local_rows) -> None:
    base = [("r", '{"a":1}', 2), ("r", '{"a":null}', 1), ("s", '{"a":1}', 1)]
    damaged = base + [("r", '{"a":1}', 1), ("r", '{"a":5}', 0), ("s", '{"a":6}', -2)]
    assert _failed(_run(spark, gx_run, "base", damaged, frames.BASE_SCHEMA, local_rows)) == {
        "base.one_row_per_tuple": 2,
        "base.mult_positive": 2,
    }

    committed = {"committed_batches": ["b1", "b2"]}
    events = [("r", 1, 3, 1, 0, "b1"), ("r", -1, 3, 1, 1, "b1"), ("s", 1, 3, 1, 2, "b2"), ("s", 1, 3, 2, 0, "b2")]
    damaged = events + [
        ("s", 1, 3, 1, 1, "b2"),  # a version another relation's event has
        ("r", 0, 3, 1, 7, "b1"),  # neither insert nor delete
        ("r", 1, 3, 1, 8, "b9"),  # a batch the manifest does not know
        ("r", 1, 3, None, 9, "b1"),  # no source
    ]
    assert _failed(_run(spark, gx_run, "events", damaged, frames.EVENTS_SCHEMA, local_rows, committed)) == {
        "events.versions_unique": 2,
        "events.op_valid": 1,
        "events.batches_committed": 1,
        "events.source_present": 1,
    }


def test_a_small_frame_goes_to_pandas_unless_it_holds_a_nan(spark) -> None:
    """pandas counts a NaN as missing, Spark as a value: a frame with one stays on Spark,
    so an epoch's outcome does not depend on which engine its frame's size picks."""
    rows = [("m_sum", '{"k":1}', 2.0, "value", None), ("m_sum", '{"k":2}', None, "value", None)]
    frame = spark.createDataFrame(rows, frames.MAPS_SCHEMA)
    nan = spark.createDataFrame([*rows, ("m_sum", '{"k":3}', float("nan"), "value", None)], frames.MAPS_SCHEMA)
    small = frames.for_gx(frame, 10)
    assert type(small).__module__.startswith("pandas") and len(small) == 2 and list(small.columns) == frame.columns
    for given, local_rows in ((frame, 1), (frame, 0), (nan, 10)):  # too many rows, never pandas, a NaN
        kept = frames.for_gx(given, local_rows)
        try:
            assert type(kept).__module__.startswith("pyspark") and kept.is_cached and kept.count() == given.count()
        finally:
            frames.release(kept)
