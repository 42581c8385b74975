"""Shared pieces of the engine tests (a module name of its own: pytest imports every
tests/*/conftest.py as `conftest`, so tests import helpers from here)."""

from __future__ import annotations

import itertools
from pathlib import Path

from cumulus.ingest.synthetic import format_value

REPO = Path(__file__).resolve().parents[2]
SIMPLE = REPO / "tests" / "fixtures" / "schemas" / "simple.sql"
CHAIN = "SELECT r.a, SUM(t.d) AS total, COUNT(*) AS n FROM r, s, t WHERE r.b = s.b AND s.c = t.c GROUP BY r.a"
SOURCES = {"a": ({"r", "s"}, 1), "b": ({"t"}, 2)}
_homes = itertools.count(1)


def write_events(events, folder: Path, relations: set[str]) -> Path:
    """Events of some relations as DBToaster files (event-order number = position)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {}
    for order, e in enumerate(events, 1):
        if e.relation in relations:
            flag = "1" if e.sign == "+" else "0"
            lines.setdefault(e.relation, []).append("|".join([str(order), flag, *map(format_value, e.values)]))
    for rel, rows in lines.items():
        (folder / f"{rel}.csv").write_text("".join(r + "\n" for r in rows))
    return folder


def write_epoch_files(rows, folder: Path, relations: set[str]) -> Path:
    """The stream rows of some relations, in DBToaster format (order|flag|values)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_rel: dict[str, list[str]] = {}
    for r in rows:
        if r.event.relation in relations:
            flag = "1" if r.event.sign == "+" else "0"
            by_rel.setdefault(r.event.relation, []).append(
                "|".join([str(max(r.order, 0)), flag, *map(format_value, r.event.values)])
            )
    for rel, lines in by_rel.items():
        (folder / f"{rel}.csv").write_text("".join(line + "\n" for line in lines))
    return folder
