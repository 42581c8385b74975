"""`cumulus sql`: run one Spark SQL statement on the Cumulus catalog and print the result
as an aligned table, CSV with a header, or JSON lines."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import sys
from collections.abc import Sequence
from typing import IO, Any

from cumulus.commands import engine_for
from cumulus.errors import SQLQueryError

FORMATS = ("table", "csv", "json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sql",
        help="run a Spark SQL statement on the Cumulus catalog",
        description="Run one Spark SQL statement on the Cumulus Iceberg catalog (the default "
        "catalog, so `ns.table` works) and print its rows.",
    )
    parser.add_argument("query", help='the statement, e.g. "SELECT * FROM marts.nation_revenue"; - reads stdin')
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    query = sys.stdin.read() if args.query == "-" else args.query
    if not query.strip():
        raise SQLQueryError("empty query: give a SQL statement or - to read it from stdin")

    from pyspark.errors import PySparkException

    engine = engine_for(args)
    try:
        df = engine.sql(query)
        columns = df.columns
        if not columns:  # DDL and DML: executed eagerly, nothing to print
            return 0
        if args.format == "json":
            lines = _json_lines(df)
            rows: list[Sequence[Any]] = []
        else:
            rows = [tuple(row) for row in df.collect()]
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SQLQueryError(f"query failed: {first}") from exc

    out = sys.stdout
    if args.format == "json":
        for line in lines:
            out.write(line + "\n")
    elif args.format == "csv":
        write_csv(columns, rows, out)
    else:
        write_table(columns, rows, out)
    return 0


def _json_lines(df: Any) -> list[str]:
    """One JSON object per row, written by Spark itself: exact decimals, ISO timestamps,
    nulls kept."""
    from pyspark.sql import functions as F

    # Rename positionally first: a result may repeat a name (a join's `k` and `k`).
    names = [f"_c{i}" for i in range(len(df.columns))]
    fields = [F.col(n).alias(c) for n, c in zip(names, df.columns, strict=True)]
    as_json = F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})
    return [row[0] for row in df.toDF(*names).select(as_json).collect()]


def format_value(value: Any, null: str) -> str:
    """A value as text: NULL marker for None, ISO dates, plain decimals, true/false."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)


def write_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_value(v, "") for v in row])


def write_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str]) -> None:
    """Columns aligned under their headers; numbers right-aligned; a row count below."""
    cells = [[format_value(v, "NULL") for v in row] for row in rows]
    numeric = [
        all(
            isinstance(row[i], int | float | decimal.Decimal) and not isinstance(row[i], bool)
            for row in rows
            if row[i] is not None
        )
        for i in range(len(columns))
    ]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return " | ".join(parts).rstrip()

    out.write(line(columns) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write(line(r) + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")
