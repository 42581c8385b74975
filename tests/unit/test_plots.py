"""The plugin page's plots: well-formed SVG with one bar per epoch and step, heights in
proportion, every bar titled with its numbers, nothing loaded from anywhere."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from cumulus.pipeline.plots import SHOWN, all_plots, step_seconds, validation

NS = "{http://www.w3.org/2000/svg}"


def _epochs(n: int) -> list[dict]:
    return [{"epoch": i, "state": "published" if i % 3 else "failed-validation", "events": 100 * i, "rejected": i % 2,
             "validation": "passed" if i % 3 else "failed", "stable_lag_s": 1.5 * i,
             "step_seconds": {"apply": 1.0, "fold": 0.5 * i, "tag": 0.1}} for i in range(1, n + 1)]


def _svg(text: str) -> ET.Element:
    return ET.fromstring(text.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def test_every_plot_is_svg_that_loads_nothing() -> None:
    plots = all_plots(_epochs(8))
    assert len(plots) == 4
    for text in plots:
        root = _svg(text)
        assert root.tag == f"{NS}svg" and root.find(f"{NS}title").text
        assert "href" not in text and "http" not in text.replace("http://www.w3.org/2000/svg", "")


def test_bars_stack_the_steps_in_proportion() -> None:
    root = _svg(step_seconds(_epochs(4)))
    bars = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(bars) == 4 * 3  # epochs x steps with time
    by_epoch = {}
    for bar in bars:
        epoch = int(bar.find(f"{NS}title").text.split(":")[0].removeprefix("epoch "))
        by_epoch.setdefault(epoch, []).append(float(bar.get("height")))
    # epoch 4 (apply 1.0 + fold 2.0 + tag 0.1 s) is the tallest stack; epoch 1 has 1.6 s
    assert max(by_epoch, key=lambda e: sum(by_epoch[e])) == 4
    assert abs(sum(by_epoch[4]) / sum(by_epoch[1]) - 3.1 / 1.6) < 0.01  # heights are drawn to 0.1 px
    assert "fold 2.0 s" in step_seconds(_epochs(4))


def test_the_latest_epochs_only_and_each_outcome_coloured() -> None:
    root = _svg(validation(_epochs(SHOWN + 15)))
    cells = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(cells) == SHOWN and cells[0].find(f"{NS}title").text.startswith("epoch 16:")
    assert {c.get("fill") for c in cells} == {"#48bb78", "#e53e3e"}
    assert validation([]) and step_seconds([])  # an empty ledger draws empty plots
