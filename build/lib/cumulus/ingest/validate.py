"""Validation of incoming rows: typed values for a relation's columns, or the reason the
row is rejected. Pure Python, run inside the ingest job's parse tasks; the one check
that needs table state (a delete of a tuple that is not alive) is in liveness.py.

Text becomes a value by `cumulus.schema.parse_value`, the same function the reference
interpreter's stream reader uses, plus range checks so nothing is silently changed on
the way into Iceberg: an integer must fit BIGINT, a decimal must fit DECIMAL(p,s)
without rounding. In text formats `\\N` is NULL, and so is an empty field of a column
that is not a string (as in cumulus/ingest/dbtoaster.py).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from decimal import Decimal

from cumulus.ingest.dbtoaster import NULL_TEXT
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, STRING, Column, parse_value

# Reason codes of cumulus.quarantine, with what they mean.
REASONS = {
    "column_count": "the row has another number of fields than the relation (or header) has columns",
    "bad_value": "a value cannot be read as the column's type, or does not fit it",
    "unknown_relation": "the row names, or the file is named after, no relation of the schema",
    "missing_field": "a column of the relation is missing from the row (or the file's header)",
    "unknown_field": "the row (or header) has a field that is no column of the relation",
    "not_null": "NULL in a column declared NOT NULL",
    "bad_op": "the operation is not one of +, -, 1, 0, -1, insert, delete",
    "malformed": "the line is not a record of the format (bad JSON, bad event-order number, ...)",
    "not_alive": "a delete of a tuple with no live copy (base + committed events + earlier rows)",
}

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
_CONTEXT = decimal.Context(prec=80)

_OPS = {
    "+": 1, "+1": 1, "1": 1, "insert": 1, "i": 1,
    "-": -1, "-1": -1, "0": -1, "delete": -1, "d": -1,
}


class Rejected(Exception):
    """A row is rejected: `reason` is a code of REASONS, `detail` says exactly why."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def parse_op(value) -> int:
    """+1 (insert) or -1 (delete) from an op field: text, a JSON number or None (insert)."""
    if value is None:
        return 1
    if isinstance(value, bool):
        raise Rejected("bad_op", f"op {value!r} is not an operation")
    if isinstance(value, int | float | Decimal):
        if value == 1:
            return 1
        if value in (0, -1):
            return -1
        raise Rejected("bad_op", f"op {value!r} is not an operation (+, -, 1, 0, -1)")
    text = str(value).strip().lower()
    if text == "":
        return 1
    if text in _OPS:
        return _OPS[text]
    raise Rejected("bad_op", f"op {str(value)!r} is not an operation (+, -, 1, 0, -1, insert, delete)")


def check(value, col: Column):
    """The value as stored in the column's Iceberg type, or Rejected."""
    if value is None:
        if not col.nullable:
            raise Rejected("not_null", f"column {col.name} is NOT NULL")
        return None
    if col.type == INT:
        if not INT_MIN <= value <= INT_MAX:
            raise Rejected("bad_value", f"column {col.name} ({col.sql_type}): {value} is out of range")
        return value
    if col.type == DECIMAL:
        return _fit_decimal(value, col)
    if col.type == FLOAT:
        return value
    return value


def _fit_decimal(value: Decimal, col: Column) -> Decimal:
    scale = col.scale if col.scale is not None else 10
    precision = col.precision or 38
    try:
        fitted = value.quantize(Decimal(1).scaleb(-scale), context=_CONTEXT)
    except decimal.InvalidOperation:
        raise Rejected("bad_value", f"column {col.name} ({col.sql_type}): {value} does not fit") from None
    if fitted != value:
        raise Rejected(
            "bad_value",
            f"column {col.name} ({col.sql_type}): {value} has more than {scale} decimal places",
        )
    if len(fitted.as_tuple().digits) > precision and fitted != 0:
        raise Rejected("bad_value", f"column {col.name} ({col.sql_type}): {value} has too many digits")
    return fitted


def text_converter(col: Column) -> Callable[[str], object]:
    """A function from a text field to the column's stored value (or Rejected). The hot
    path of ingestion: INT and DECIMAL parse inline exactly as parse_value does (int(),
    Decimal() and a finiteness check); the other types call parse_value."""
    where = f"column {col.name} ({col.sql_type})"
    nullable = col.nullable

    def null():
        if not nullable:
            raise Rejected("not_null", f"column {col.name} is NOT NULL")
        return None

    def bad(text: str, why: str = "") -> Rejected:
        return Rejected("bad_value", f"{where}: {why or f'cannot read {text!r} as {col.type}'}")

    if col.type == STRING:

        def convert(text: str):
            return null() if text == NULL_TEXT else text

    elif col.type == INT:

        def convert(text: str):
            if text == NULL_TEXT or text == "":
                return null()
            try:
                value = int(text)
            except ValueError:
                raise bad(text, f"invalid literal for int(): {text!r}") from None
            if not INT_MIN <= value <= INT_MAX:
                raise bad(text, f"{value} is out of range")
            return value

    elif col.type == DECIMAL:
        scale = col.scale if col.scale is not None else 10
        quantum = Decimal(1).scaleb(-scale)
        limit = Decimal(10) ** ((col.precision or 38) - scale)

        def convert(text: str):
            if text == NULL_TEXT or text == "":
                return null()
            try:
                value = Decimal(text)
            except decimal.InvalidOperation:
                raise bad(text, f"not a decimal number: {text!r}") from None
            if not value.is_finite():
                raise bad(text, f"not a finite decimal number: {text!r}")
            try:
                fitted = value.quantize(quantum, context=_CONTEXT)
            except decimal.InvalidOperation:  # more digits than the context holds
                raise bad(text, f"{value} has too many digits") from None
            if fitted != value:
                raise bad(text, f"{value} has more than {scale} decimal places")
            if abs(fitted) >= limit:
                raise bad(text, f"{value} has too many digits")
            return fitted

    else:
        kind = col.type

        def convert(text: str):
            if text == NULL_TEXT or text == "":
                return null()
            try:
                return parse_value(text, kind)
            except ValueError as exc:
                raise bad(text, str(exc)) from None

    return convert


def _type_error(col: Column, value) -> Rejected:
    return Rejected(
        "bad_value",
        f"column {col.name} ({col.sql_type}): {type(value).__name__} value {value!r} is not a {col.type}",
    )


def value_converter(col: Column) -> Callable[[object], object]:
    """A function from a typed value (JSON or Parquet: int, float, Decimal, str, date,
    bool, None) to the column's stored value (or Rejected). Strings are read as text."""
    from_text = text_converter(col)

    def convert(value):
        if value is None:
            return check(None, col)
        if isinstance(value, str):
            return from_text(value)
        kind = col.type
        if kind == INT:
            if isinstance(value, bool) or not isinstance(value, int):
                raise _type_error(col, value)
            return check(value, col)
        if kind == DECIMAL:
            if isinstance(value, bool):
                raise _type_error(col, value)
            if isinstance(value, int | Decimal):
                return check(Decimal(value), col)
            if isinstance(value, float):
                if not math.isfinite(value):
                    raise _type_error(col, value)
                return check(Decimal(repr(value)), col)
            raise _type_error(col, value)
        if kind == FLOAT:
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                raise _type_error(col, value)
            try:
                return float(value)
            except OverflowError:  # an integer past DOUBLE's range: inf, as its text gives
                return float(Decimal(value))
        if kind == DATE:
            if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
                raise _type_error(col, value)
            return value
        if kind == BOOL:
            if isinstance(value, bool):
                return value
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise _type_error(col, value)
        raise _type_error(col, value)  # STRING takes only strings

    return convert
