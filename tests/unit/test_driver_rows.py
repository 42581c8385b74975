"""The driver apply's delta rows (cumulus/engine/driver_apply.py): values as the maps'
types store them, rounded as Spark's cast rounds, and the batch sent the Spark way where
Spark would write a value otherwise. Its results over whole views are checked against
DuckDB by the corpus test (tests/engine/test_epochs.py) and the kill loops."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

from cumulus.engine.driver_apply import _delta_rows, _value
from cumulus.m3.validate import MapInfo

COLUMNS = ["map", "v_int", "v_float", "v_decimal", "k0_decimal", "k0_int", "k1_string"]
PLAN = SimpleNamespace(maps={
    "rev": MapInfo("rev", ("nation", "name"), ("int", "string"), "decimal"),
    "cnt": MapInfo("cnt", (), (), "int"),
    "by_price": MapInfo("by_price", ("price",), ("decimal",), "float"),
})


def test_values_take_the_maps_types_rounded_half_up_as_spark_casts() -> None:
    assert _value(Decimal("1.0000005"), "decimal") == Decimal("1.000001")
    assert _value(Decimal("-1.0000005"), "decimal") == Decimal("-1.000001")
    assert _value(Decimal("2.5"), "decimal").as_tuple().exponent == -6
    assert _value(7, "int") == 7 and _value(Decimal("1.5"), "float") == 1.5
    # Beyond what Spark writes (BIGINT, DECIMAL(38,6)), or not an int for an int map: Spark's way.
    assert _value(1 << 63, "int") is None and _value(Decimal("1.5"), "int") is None
    assert _value(Decimal(10) ** 32, "decimal") is None


def test_delta_rows_fill_their_maps_slots_and_drop_zero_sums() -> None:
    journal = {("rev", (7, "x")): Decimal("1.25"), ("cnt", ()): 0, ("by_price", (Decimal("9.99"),)): 2.0}
    rows = _delta_rows(PLAN, journal, COLUMNS)
    assert rows == [
        ("rev", None, None, Decimal("1.250000"), None, 7, "x"),
        ("by_price", None, 2.0, None, Decimal("9.99"), None, None),
    ]
    # A decimal key finer than the slot's scale: Spark's cast would merge keys; Spark's way.
    assert _delta_rows(PLAN, {("by_price", (Decimal("0.0000001"),)): 1.0}, COLUMNS) is None
    # One written with more digits than the scale but exact at it (0.5 * SUM(x) gives
    # 19.5000000): the driver's, as the slot holds it.
    rows = _delta_rows(PLAN, {("by_price", (Decimal("19.5000000"),)): 1.0}, COLUMNS)
    assert rows == [("by_price", None, 1.0, None, Decimal("19.5000000"), None, None)]
