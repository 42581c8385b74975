"""Result rows as JSON lines: exact decimals, ISO dates, valid JSON for every value."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from cumulus.output import render


def test_json_lines_keep_decimals_exact_and_dates_iso():
    rows = [
        (Decimal("12345678901234567890.123456"), Decimal("0.10"), 7, 1.5, "a\"b", None, True,
         dt.date(1995, 9, 1), dt.datetime(2026, 11, 24, 1, 2, 3)),
        (Decimal("-5"), Decimal("NaN"), -1, float("nan"), "", None, False, None, None),
    ]
    columns = ["big", "small", "n", "f", "s", "z", "b", "d", "t"]
    lines = render(columns, rows, "json").splitlines()
    exact = [json.loads(line, parse_float=Decimal) for line in lines]
    assert exact[0] == {
        "big": Decimal("12345678901234567890.123456"), "small": Decimal("0.10"), "n": 7, "f": Decimal("1.5"),
        "s": 'a"b', "z": None, "b": True, "d": "1995-09-01", "t": "2026-11-24T01:02:03",
    }
    assert exact[1]["big"] == -5 and exact[1]["small"] is None and exact[1]["f"] is None
    # A float parser reads the same lines (the digits are plain JSON numbers).
    assert json.loads(lines[0])["small"] == 0.1
