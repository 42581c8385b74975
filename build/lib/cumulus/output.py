"""Printing result rows for people and programs: an aligned table, CSV with a header
(dates as ISO text, decimals exact, NULL as empty), or JSON lines: one object per row,
decimals as exact JSON numbers (their digits as stored, never through a float: read them
with a decimal-aware parser, e.g. Python's `json.loads(line, parse_float=Decimal)`),
dates and timestamps as ISO 8601 strings, NULL as null."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal

FORMATS = ("table", "csv", "json")


def text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):  # as precise as the value, no more (ledger times: milliseconds)
        spec = "seconds" if not value.microsecond else "milliseconds" if not value.microsecond % 1000 else "auto"
        return value.isoformat(sep=" ", timespec=spec)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def sort_key(row: Sequence) -> tuple:
    """Orders rows with NULLs first and mixed types without errors."""
    return tuple((v is not None, type(v).__name__ if v is not None else "", v if v is not None else 0) for v in row)


def render(columns: Sequence[str], rows: Iterable[Sequence], fmt: str = "csv") -> str:
    rows = [list(r) for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[text(v) for v in r] for r in rows])
        return buf.getvalue()
    if fmt == "json":
        return "".join(json_line(columns, r) + "\n" for r in rows)
    if fmt == "table":
        cells = [[text(v) if v is not None else "NULL" for v in r] for r in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        numeric = [all(isinstance(r[i], (int, float, Decimal)) or r[i] is None for r in rows) and rows != [] for i in range(len(columns))]
        def line(values):
            return " | ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()
        out = [line(list(columns)), "-+-".join("-" * w for w in widths)]
        out += [line(r) for r in cells]
        out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
        return "\n".join(out) + "\n"
    raise ValueError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")


def json_value(value) -> str:
    """One value as JSON text: a finite decimal as an exact number, a date or timestamp as
    an ISO 8601 string (naive timestamps are UTC in Cumulus)."""
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else "null"
    if isinstance(value, dt.date):  # a datetime too
        return json.dumps(value.isoformat())
    if isinstance(value, float) and not math.isfinite(value):
        return "null"  # JSON has no NaN or infinity
    return json.dumps(value, default=str)


def json_line(columns: Sequence[str], row: Sequence) -> str:
    """A row as one JSON object (see `json_value`)."""
    fields = (f"{json.dumps(c)}: {json_value(v)}" for c, v in zip(columns, row, strict=True))
    return "{" + ", ".join(fields) + "}"


# ------------------------------------------------------------------ what a step printed
# The CLI (cumulus/commands) and the Spark jobs (cumulus/jobs) print a step's outcome
# alike; the objects come from cumulus.app (duck-typed here: output imports nothing).

MAINTENANCE_COLUMNS = ("table", "snapshots_before", "snapshots_after", "tags", "data_files_deleted",
                       "files_rewritten", "files_added", "delete_files_removed", "layer_rows_compacted",
                       "delta_rows_compacted", "log_rows_compacted", "seconds")


def closed_text(epoch: int, metrics: dict, fmt: str = "table") -> str:
    """A close's outcome: its headline and the metrics the ledger row got."""
    return f"epoch {epoch} closed and tagged epoch-{epoch}\n" + render(list(metrics), [tuple(metrics.values())], fmt)


def ingest_text(report) -> str:
    """An ingest report (cumulus.ingest.report.IngestReport): per relation, per file, its headline."""
    parts = []
    if report.relations:
        parts.append(render(*report.relation_rows(), "table"))
    if report.files:
        parts.append(render(*report.file_rows(), "table"))
    if report.recovered:
        parts.append(f"rolled back first: {len(report.recovered)} incomplete batch(es): {', '.join(report.recovered)}\n")
    parts.append(f"source {report.source}: no files to ingest\n" if report.epoch is None else report.headline() + "\n")
    return "".join(parts)


def maintenance_text(reports, fmt: str = "table") -> str:
    """One row per table that maintenance went through (cumulus.store.maintenance.TableReport)."""
    return render(list(MAINTENANCE_COLUMNS), [tuple(getattr(r, c) for c in MAINTENANCE_COLUMNS) for r in reports], fmt)
