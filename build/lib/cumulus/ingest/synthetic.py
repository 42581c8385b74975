"""Synthetic event streams for any schema: random inserts over small value domains (so
joins match often) and deletes of tuples that are alive, written in the DBToaster
stream format. Deterministic for a seed; used by tests, property tests and the demo."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

from cumulus.ingest.dbtoaster import NULL_TEXT
from cumulus.m3.interpreter import Event
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, Column, Schema

_WORDS = ("red", "green", "blue", "MAIL", "SHIP", "AIR", "1-URGENT", "5-LOW")


def random_value(col: Column, rng: random.Random, domain: int):
    if col.nullable and rng.random() < 0.03:
        return None
    if col.type == INT:
        return rng.randint(1, domain)
    if col.type == DECIMAL:
        scale = col.scale if col.scale is not None else 2
        return Decimal(rng.randint(-5, 100 * domain)).scaleb(-scale) if scale else Decimal(rng.randint(0, 100))
    if col.type == FLOAT:
        return rng.choice((0.5, 1.25, 0.1, 0.2, 3.0, 0.7))
    if col.type == DATE:
        return dt.date(1994, 1, 1) + dt.timedelta(days=rng.randint(0, 3 * 365))
    if col.type == BOOL:
        return rng.random() < 0.5
    return rng.choice(_WORDS[: max(2, min(len(_WORDS), domain))])


def generate_events(
    schema: Schema, n: int, seed: int = 0, domain: int = 4, delete_ratio: float = 0.3
) -> list[Event]:
    """`n` events over every relation of the schema; a delete removes a live tuple."""
    rng = random.Random(seed)
    alive: dict[str, list[tuple]] = {r.name: [] for r in schema.relations}
    events: list[Event] = []
    for _ in range(n):
        rel = rng.choice(schema.relations)
        live = alive[rel.name]
        if live and rng.random() < delete_ratio:
            values = live.pop(rng.randrange(len(live)))
            events.append(Event("-", rel.name, values))
        else:
            values = tuple(random_value(c, rng, domain) for c in rel.columns)
            live.append(values)
            events.append(Event("+", rel.name, values))
    return events


def format_value(value) -> str:
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def write_dbtoaster(events: list[Event], folder: str | Path, schema: Schema) -> Path:
    """Write events as `<relation>.csv` files: `order|flag|values...` (one event each)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[str]] = {r.name: [] for r in schema.relations}
    for order, e in enumerate(events, 1):
        flag = "1" if e.sign == "+" else "0"
        lines[e.relation].append("|".join([str(order), flag, *map(format_value, e.values)]))
    for name, rows in lines.items():
        (folder / f"{name}.csv").write_text("".join(r + "\n" for r in rows))
    return folder


def alive_rows(events: list[Event]) -> dict[str, list[tuple]]:
    """The multiset of tuples alive after the events, per relation."""
    out: dict[str, list[tuple]] = {}
    for e in events:
        rows = out.setdefault(e.relation, [])
        if e.sign == "+":
            rows.append(e.values)
        else:
            rows.remove(e.values)
    return out
