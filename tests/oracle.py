"""The independent oracle of the tests: DuckDB runs a view's SQL over the tuples alive at
a point of the stream. Nothing here shares code with the compiler or the interpreter."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import duckdb

from cumulus.schema import Schema


def duckdb_result(schema: Schema, rows: dict[str, list[tuple]], sql: str) -> list[tuple]:
    con = duckdb.connect()
    for rel in schema.relations:
        cols = ", ".join(f"{c.name} {c.sql_type.replace('STRING', 'VARCHAR')}" for c in rel.columns)
        con.execute(f"CREATE TABLE {rel.name} ({cols})")
        data = rows.get(rel.name, [])
        if data:
            marks = ", ".join("?" for _ in rel.columns)
            con.executemany(f"INSERT INTO {rel.name} VALUES ({marks})", [list(r) for r in data])
    return con.execute(sql).fetchall()


def normalize(value):
    """A value in a form that compares across engines: numbers as Decimal rounded to 9
    places when inexact (AVG, floats), exact otherwise."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, dt.date)):
        return value
    if isinstance(value, float):
        return round(Decimal(repr(value)), 6)
    if isinstance(value, Decimal):
        return value.normalize() if value == value.quantize(Decimal("1e-9")) else round(value, 6)
    if isinstance(value, int):
        return Decimal(value).normalize()
    return value


def as_bag(rows) -> list[tuple]:
    return sorted((tuple(normalize(v) for v in r) for r in rows), key=repr)
