"""Plots over epochs for the Airflow plugin's page, as inline SVG drawn here: no script,
no stylesheet and nothing from another host, so the page renders where the pipeline
runs without internet access, and in any browser Airflow supports.

Each function takes the epochs of `pipeline_status` (oldest first) and returns an
<svg> element: the close's seconds per step (stacked bars), events and rejected rows per
epoch, the lag from sealing an epoch to its consistent snapshot, and the validation
outcome of each epoch."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 170, 48, 22, 22
STEP_COLORS = {"apply": "#4c78a8", "repair": "#f58518", "fold": "#54a24b", "compact_maps": "#b279a2", "tag": "#9d755d"}
OUTCOME_COLORS = {"passed": "#48bb78", "failed": "#e53e3e", None: "#cbd5e0"}
SHOWN = 60  # the latest epochs drawn


def _frame(title: str, top: float, body: list[str], legend: Sequence[tuple[str, str]] = (), unit: str = "",
           grid: bool = True) -> str:
    ticks = []
    for frac in (0, 0.5, 1) if grid else ():
        y = TOP + (HEIGHT - TOP - BOTTOM) * (1 - frac)
        ticks.append(f'<line x1="{LEFT}" x2="{WIDTH - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#edf2f7"/>'
                     f'<text x="{LEFT - 4}" y="{y + 3:.1f}" text-anchor="end">{_num(top * frac)}{unit}</text>')
    keys = "".join(
        f'<rect x="{LEFT + 150 + i * 95}" y="6" width="9" height="9" fill="{color}"/>'
        f'<text x="{LEFT + 162 + i * 95}" y="14">{html.escape(name)}</text>'
        for i, (name, color) in enumerate(legend)
    )
    return (f'<svg class="plot" role="img" aria-label="{html.escape(title)}" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="system-ui, sans-serif" font-size="10" fill="#4a5568">'
            f'<title>{html.escape(title)}</title><text x="{LEFT}" y="14" font-weight="600" fill="#1a202c">'
            f'{html.escape(title)}</text>{keys}{"".join(ticks)}{"".join(body)}</svg>')


def _num(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.0f}k" if value >= 10_000 else f"{value / 1000:.1f}k"
    return f"{value:.0f}" if value >= 10 or value == 0 else f"{value:.1f}"


def _slots(epochs: list[dict]) -> tuple[list[dict], float]:
    shown = epochs[-SHOWN:]
    return shown, (WIDTH - 8 - LEFT) / max(len(shown), 1)


def _x_labels(shown: list[dict], slot: float) -> list[str]:
    every = max(1, len(shown) // 12)
    return [f'<text x="{LEFT + (i + 0.5) * slot:.1f}" y="{HEIGHT - 8}" text-anchor="middle">{e["epoch"]}</text>'
            for i, e in enumerate(shown) if i % every == 0 or i == len(shown) - 1]


def _bars(epochs: list[dict], title: str, series: dict[str, str], value, unit: str = "") -> str:
    """Stacked bars: `value(epoch, name)` of each series per epoch."""
    shown, slot = _slots(epochs)
    totals = [sum(value(e, name) or 0 for name in series) for e in shown]
    top = max(totals, default=0) or 1
    scale = (HEIGHT - TOP - BOTTOM) / top
    body = _x_labels(shown, slot)
    for i, e in enumerate(shown):
        y = HEIGHT - BOTTOM
        tip = ", ".join(f"{name} {_num(value(e, name) or 0)}{unit}" for name in series)
        for name, color in series.items():
            h = (value(e, name) or 0) * scale
            if h > 0:
                y -= h
                body.append(f'<rect x="{LEFT + i * slot + slot * 0.15:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" '
                            f'height="{h:.1f}" fill="{color}"><title>epoch {e["epoch"]}: {html.escape(tip)}'
                            f'</title></rect>')
    return _frame(title, top, body, list(series.items()) if len(series) > 1 else (), unit)


def step_seconds(epochs: list[dict]) -> str:
    return _bars(epochs, "close: seconds per step", STEP_COLORS,
                 lambda e, name: (e.get("step_seconds") or {}).get(name), " s")


def events(epochs: list[dict]) -> str:
    return _bars(epochs, "events per epoch", {"accepted": "#4c78a8", "rejected": "#e45756"},
                 lambda e, name: e.get("events") if name == "accepted" else e.get("rejected"))


def stable_lag(epochs: list[dict]) -> str:
    return _bars(epochs, "seconds from sealing to the consistent snapshot", {"lag": "#72b7b2"},
                 lambda e, _: e.get("stable_lag_s"), " s")


def validation(epochs: list[dict]) -> str:
    shown, slot = _slots(epochs)
    body = _x_labels(shown, slot)
    for i, e in enumerate(shown):
        outcome = e.get("validation")
        color = OUTCOME_COLORS.get(outcome, OUTCOME_COLORS[None])
        body.append(f'<rect x="{LEFT + i * slot + slot * 0.15:.1f}" y="{TOP + 40}" width="{slot * 0.7:.1f}" height="40" '
                    f'fill="{color}"><title>epoch {e["epoch"]}: {html.escape(outcome or e["state"])}</title></rect>')
    legend = [("passed", OUTCOME_COLORS["passed"]), ("failed", OUTCOME_COLORS["failed"]),
              ("not validated", OUTCOME_COLORS[None])]
    return _frame("validation", 0, body, legend, grid=False)


def all_plots(epochs: list[dict[str, Any]]) -> list[str]:
    return [step_seconds(epochs), events(epochs), stable_lag(epochs), validation(epochs)]
