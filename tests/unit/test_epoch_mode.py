"""Incremental or recompute, chosen per epoch from measured costs (cumulus/engine/recompute.py):
the choice follows the numbers, the setting forces either, and every choice says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from cumulus.config import Settings
from cumulus.engine.recompute import (
    INCREMENTAL,
    RECOMPUTE,
    Pending,
    choose,
    defer_to_close,
    fit_line,
)
from cumulus.errors import ConfigError


def settings(tmp_path: Path, mode: str = "auto") -> Settings:
    return Settings(home=tmp_path, epoch_mode=mode)


def applied(events: int, batches: int, seconds: float) -> dict:
    return {"mode": INCREMENTAL, "events": events, "batches": batches, "applies_s": seconds}


def test_fit_line_recovers_fixed_and_per_event_costs() -> None:
    a, b = fit_line([(100, 2.0 + 100 * 0.001), (1000, 2.0 + 1000 * 0.001), (5000, 2.0 + 5000 * 0.001)])
    assert a == pytest.approx(2.0) and b == pytest.approx(0.001)
    assert fit_line([(10, 1.0), (10, 2.0)]) is None  # one size: no slope
    assert fit_line([(10, 5.0), (1000, 1.0)]) == (3.0, 0.0)  # never negative: the mean


def test_nothing_measured_rebuilds_only_an_empty_base(tmp_path) -> None:
    pending = Pending(["b1", "b2"], 5000, [1, 2])
    first = choose(settings(tmp_path), pending, 0, [])
    assert first.mode == RECOMPUTE and "empty" in first.reason
    later = choose(settings(tmp_path), pending, 10_000, [])
    assert later.mode == INCREMENTAL and "nothing measured" in later.reason


def test_the_measured_costs_decide(tmp_path) -> None:
    # applies cost 2 s per batch plus 1 ms per event; the last rebuild read 1M rows in 10 s
    history = [applied(e * 2, 2, 2 * 2.0 + e * 2 * 0.001) for e in (500, 800, 2000)]
    history.append({"mode": RECOMPUTE, "recompute_s": 10.0, "recompute_rows": 1_000_000})
    small = choose(settings(tmp_path), Pending(["b1", "b2"], 1500, [1, 2]), 1_000_000, history)
    assert small.mode == INCREMENTAL  # ~7 s against ~10 s
    assert "1500 events in 2 batches" in small.reason and "measured" in small.reason
    bulk = choose(settings(tmp_path), Pending(["b1", "b2"], 400_000, [1, 2]), 1_000_000, history)
    assert bulk.mode == RECOMPUTE  # ~404 s against ~14 s
    # without a measured rebuild, a row costs what an applied event costs
    unmeasured = choose(settings(tmp_path), Pending(["b1"], 400_000, [1]), 1_000_000, history[:-1])
    assert unmeasured.mode == INCREMENTAL and "assumed" in unmeasured.reason


def test_the_setting_forces_either_and_nothing_pending_is_incremental(tmp_path) -> None:
    pending = Pending(["b1"], 10, [1])
    assert choose(settings(tmp_path, "recompute"), pending, 10**9, []).mode == RECOMPUTE
    assert choose(settings(tmp_path, "incremental"), pending, 0, []).mode == INCREMENTAL
    assert choose(settings(tmp_path), Pending([], 0, []), 0, []).reason == "every batch was applied before the close"
    assert defer_to_close(settings(tmp_path, "recompute")) and defer_to_close(settings(tmp_path)) is None
    with pytest.raises(ConfigError, match="epoch_mode must be one of auto, incremental, recompute"):
        settings(tmp_path, "sometimes")
