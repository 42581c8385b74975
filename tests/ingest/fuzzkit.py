"""Fuzzed landing files for the ingestion tests (issue 13): hypothesis draws rows of the
shop schema (tests/ingest/data/shop.sql), good or with one defect each, and writes them
in every landing format. Each file comes with what ingestion must make of it, decided
here from the defect drawn, not by the readers: per line, the typed tuple and op of a
valid row, or the quarantine reason of a bad one.

Defects: truncated lines, wrong column counts, invalid UTF-8, a bare carriage return in
a CSV row, wrong types, numbers out of
range (a 5000-digit one too), out-of-range dates, decimals beyond the declared scale or
precision, NULL in a NOT NULL key, bad ops and event-order numbers, JSON that is cut,
nested too deeply, or misses or adds a field, a JSON integer past DOUBLE's range (inf), rows of unknown relations, whitespace and
blank lines, huge string fields (valid: strings have no length limit). Files: empty ones,
a missing final newline, relations named by the file or per row (JSON Lines), DBToaster
static files and event folders, Parquet files with missing, extra or mistyped columns.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from ingestkit import SHOP

from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, STRING, Column, Relation, load_schema

SCHEMA = load_schema(SHOP)
RELATIONS = [SCHEMA.relation(n) for n in SCHEMA.names]
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
DAY0 = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class Expect:
    """What one line (Parquet: row) must become: a valid row (values, op) or a bad one
    (reason)."""

    line: int
    relation: str | None
    op: int = 1
    values: tuple | None = None
    reason: str | None = None


@dataclass
class Fuzzed:
    """A file to write: its name (relative to a folder), bytes, and expectations."""

    name: str
    data: bytes
    expect: list[Expect] = field(default_factory=list)
    order: dict[int, int] = field(default_factory=dict)  # DBToaster event files: line -> event order

    def write(self, folder: Path) -> Path:
        path = folder / self.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data)
        return path


# ------------------------------------------------------------------ values

# Text without the characters no text format can carry in an unquoted value: the line
# end, DBToaster's `|`, and the NULL marker's backslash; CSV quotes what it must.
SAFE_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n|\\"), max_size=12)
CSV_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\\"), max_size=12)
PLAIN_TEXT = st.text(st.sampled_from("abcxyz019 _-."), max_size=8)


def typed(col: Column, text=SAFE_TEXT):
    """A valid value of the column (None where it is nullable)."""
    kinds = {
        INT: st.one_of(st.integers(-1000, 1000), st.integers(INT_MIN, INT_MAX)),
        DECIMAL: st.decimals(min_value=Decimal("-99999999.99"), max_value=Decimal("99999999.99"), places=2),
        FLOAT: st.floats(allow_nan=False, width=64),
        DATE: st.dates(),
        BOOL: st.booleans(),
        STRING: text,
    }
    value = kinds[col.type]
    return st.one_of(st.none(), value) if col.nullable else value


def tuples(rel: Relation, text=SAFE_TEXT):
    return st.tuples(*[typed(c, text) for c in rel.columns])


@st.composite
def as_text(draw, value, col: Column) -> str:
    """A text field that reads as `value` (several spellings of one value)."""
    if value is None:
        return draw(st.sampled_from(["\\N"] if col.type == STRING else ["\\N", ""]))
    if col.type == DECIMAL:
        return draw(st.sampled_from([str(value), format(value.normalize(), "f")]))
    if col.type == FLOAT:
        return repr(value)
    if col.type == DATE:
        return value.isoformat()
    if col.type == BOOL:
        return draw(st.sampled_from(["true", "1", "t", "TRUE"] if value else ["false", "0", "f", "False"]))
    return str(value)


# A defect of one field: (kind, column types it applies to, strategy of its text).
FIELD_DEFECTS = {
    "wrong_type_int": (INT, st.sampled_from(["abc", "1.5", "1e3", "0x10", "--1"])),
    "int_out_of_range": (INT, st.one_of(
        st.integers(INT_MAX + 1, 2**70).map(str), st.integers(-(2**70), INT_MIN - 1).map(str),
        st.just("9" * 5000))),
    "wrong_type_decimal": (DECIMAL, st.sampled_from(["abc", "1.2.3", "NaN", "Infinity", "1e"])),
    "beyond_scale": (DECIMAL, st.tuples(st.integers(0, 10**6), st.integers(3, 8)).map(
        lambda t: str(Decimal(t[0] * 10 + 1).scaleb(-t[1])))),
    "beyond_precision": (DECIMAL, st.one_of(
        st.integers(10**8, 10**30).map(str), st.just("9" * 100), st.just("1e999999"))),
    "wrong_type_float": (FLOAT, st.sampled_from(["abc", "1,5", "0x1p3", "--2"])),
    "bad_date": (DATE, st.sampled_from(
        ["2024-13-01", "2024-02-30", "2023-02-29", "0000-01-01", "10000-01-01", "2024/01/01", "yesterday"])),
    "wrong_type_bool": (BOOL, st.sampled_from(["maybe", "2", "yes", "-1"])),
}
NULL_KEY = "null_key"


@st.composite
def row_spec(draw, rel: Relation, kinds: list[str], text=SAFE_TEXT):
    """(values, op, defect, column, bad text): a valid row (defect None) or one defect."""
    values = draw(tuples(rel, text))
    op = draw(st.sampled_from([1, 1, 1, -1]))
    kind = draw(st.one_of(st.none(), st.sampled_from(kinds)))
    if kind in FIELD_DEFECTS:
        ctype, texts = FIELD_DEFECTS[kind]
        cols = [i for i, c in enumerate(rel.columns) if c.type == ctype]
        if not cols:
            return values, op, None, None, None
        return values, op, kind, draw(st.sampled_from(cols)), draw(texts)
    return values, op, kind, 0, None


VALUE_KINDS = [*FIELD_DEFECTS, NULL_KEY]


def _lines_of(data: bytes) -> int:
    return data.count(b"\n")


def _corrupt(data: bytes, at: int) -> bytes:
    """The line with a byte that is never valid UTF-8 inserted (before the line end)."""
    body = data.rstrip(b"\n")
    at = min(at, len(body))
    return body[:at] + b"\xff" + body[at:] + data[len(body):]


def _finish(parts: list[tuple[bytes, Expect | None]], final_newline: bool) -> tuple[bytes, list[Expect]]:
    """Join line pieces, numbering lines (an Expect's line is set here)."""
    out, expect, line = b"", [], 1
    for data, exp in parts:
        if exp is not None:
            expect.append(Expect(line, exp.relation, exp.op, exp.values, exp.reason))
        out += data
        line += _lines_of(data)
    if not final_newline and out.endswith(b"\n"):
        out = out[:-1]
    return out, expect


# ------------------------------------------------------------------ DBToaster


@st.composite
def dbtoaster_file(draw, rel: Relation, name: str | None = None, events: bool | None = None):
    """A `<rel>.tbl` static file or `<rel>.csv` event file (`|`-separated)."""
    events = draw(st.booleans()) if events is None else events
    a = rel.arity
    trailing = not events and draw(st.booleans())
    kinds = VALUE_KINDS + ["count", "truncated", "utf8", "blank", "spaces"] + (["flag", "order"] if events else [])
    parts: list[tuple[bytes, Expect | None]] = []
    orders: list[int] = []
    for _ in range(draw(st.integers(0, 12))):
        values, op, kind, col, bad = draw(row_spec(rel, kinds))
        op = op if events else 1
        order = draw(st.integers(0, 50))
        fields = [draw(as_text(v, c)) for v, c in zip(values, rel.columns, strict=True)]
        reason = None
        if kind in FIELD_DEFECTS:
            fields[col] = bad
            reason = "bad_value"
        elif kind == NULL_KEY:
            fields[0] = draw(st.sampled_from(["\\N", ""]))
            reason = "not_null"
        head = [str(order), "1" if op > 0 else "0"] if events else []
        if kind == "flag":
            head[1] = draw(st.sampled_from(["2", "-1", "x", ""]))
            reason = "bad_op"
        if kind == "order":
            head[0] = draw(st.sampled_from(["x", "1.5", "", "#"]))
            reason = "malformed"
        cells = head + fields + ([""] if trailing else [])
        if kind == "count":  # a field more or fewer, never another valid shape
            n = draw(st.sampled_from([c for c in range(1, a + 5) if c not in (a, a + 2) and c != len(cells)]))
            cells = (cells + ["7"] * n)[:n]
            if len(cells) == a + 1 and cells[-1] == "":
                cells[-1] = "7"
            reason = "column_count"
        text = "|".join(cells)
        if kind == "truncated":  # cut inside the line, before its last separator
            seps = [i for i, ch in enumerate(text) if ch == "|"]
            cut = draw(st.integers(1, seps[-1]))
            text = text[:cut]
            n = text.count("|") + 1 if "|" in text else len(text.split(","))
            if n in (a, a + 1, a + 2):
                continue  # another valid shape: no defect a reader could see
            reason = "column_count"
        if kind == "blank":
            parts.append((draw(st.sampled_from([b"\n", b"\r\n"])), None))
            continue
        if kind == "spaces":
            parts.append((b"   \n", Expect(0, rel.name, reason="column_count")))
            orders.append(0)
            continue
        data = text.encode() + draw(st.sampled_from([b"\n", b"\r\n"]))
        if kind == "utf8":
            data = _corrupt(data, draw(st.integers(0, len(data))))
            reason = "malformed"
        exp = Expect(0, rel.name, op, None if reason else _typed(values, rel), reason)
        parts.append((data, exp))
        # The row's place in a DBToaster folder's stream: its event-order number, -1 for
        # a static row, 0 for a line of neither shape.
        shapeless = kind in ("order", "utf8", "count", "truncated")
        orders.append(0 if shapeless else (order if events else -1))
    data, expect = _finish(parts, draw(st.booleans()))
    suffix = ".csv" if events else ".tbl"
    fz = Fuzzed(name or f"{rel.name}{suffix}", data, expect)
    fz.order = {e.line: o for e, o in zip(expect, orders, strict=True)}
    return fz


def _typed(values: tuple, rel: Relation) -> tuple:
    return tuple(v.quantize(Decimal(1).scaleb(-c.scale)) if v is not None and c.type == DECIMAL else v
                 for v, c in zip(values, rel.columns, strict=True))


# ------------------------------------------------------------------ CSV


@st.composite
def csv_file(draw, rel: Relation):
    """`<rel>.csv` with a header of the columns in any order (and maybe `op`)."""
    names = draw(st.permutations(rel.column_names))
    with_op = draw(st.booleans())
    header = [*names, "op"] if with_op else list(names)
    if draw(st.booleans()) and with_op:
        header = draw(st.permutations(header))
    kinds = VALUE_KINDS + ["count", "truncated", "utf8", "cr", "blank", "spaces", "huge"] + (["bad_op"] if with_op else [])
    parts: list[tuple[bytes, Expect | None]] = [(_csv_line(header), None)]
    for _ in range(draw(st.integers(0, 12))):
        values, op, kind, col, bad = draw(row_spec(rel, kinds, CSV_TEXT))
        op = op if with_op else 1
        texts = {c.name: draw(as_text(v, c)) for v, c in zip(values, rel.columns, strict=True)}
        reason = None
        if kind in FIELD_DEFECTS:
            texts[rel.columns[col].name] = bad
            reason = "bad_value"
        elif kind == NULL_KEY:
            texts[rel.columns[0].name] = draw(st.sampled_from(["\\N", ""]))
            reason = "not_null"
        elif kind == "huge" and any(c.type == STRING for c in rel.columns):
            name = next(c.name for c in rel.columns if c.type == STRING)
            values = tuple("x" * 200_000 if c.name == name else v for v, c in zip(values, rel.columns, strict=True))
            texts[name] = values[rel.column_names.index(name)]
        if with_op:
            texts["op"] = draw(st.sampled_from(["+", "insert", "1", "+1", ""] if op > 0 else ["-", "delete", "0", "-1", "d"]))
        if kind == "bad_op":
            texts["op"] = draw(st.sampled_from(["x", "2", "++", "del"]))
            reason = "bad_op"
        cells = [texts[h] for h in header]
        if kind == "count":
            cells = cells + ["7"] if draw(st.booleans()) else cells[:-1]
            reason = "column_count"
        data = _csv_line(cells)
        if kind == "truncated":  # a plain row cut before its last comma
            cells = [draw(PLAIN_TEXT) for _ in header]
            text = ",".join(cells)
            cut = draw(st.integers(1, text.rindex(",")))
            data = text[:cut].encode() + b"\n"
            reason = "column_count"
        if kind == "cr":  # a bare carriage return inside a plain row
            text = ",".join(draw(PLAIN_TEXT) for _ in header)
            at = draw(st.integers(0, max(0, len(text) - 1)))
            data = (text[:at] + "\r" + text[at:]).encode() + b"\n" if text else b"\r,\n"
            reason = "malformed"
        if kind == "blank":
            parts.append((b"\n", None))
            continue
        if kind == "spaces":
            parts.append((b"   \n", Expect(0, rel.name, reason="column_count")))
            continue
        if kind == "utf8":  # in a plain row (no quoted field spans lines)
            text = ",".join(draw(PLAIN_TEXT) for _ in header)
            data = _corrupt(text.encode() + b"\n", draw(st.integers(0, len(text))))
            reason = "malformed"
        parts.append((data, Expect(0, rel.name, op, None if reason else _typed(values, rel), reason)))
    data, expect = _finish(parts, draw(st.booleans()))
    return Fuzzed(f"{rel.name}.csv", data, expect)


def _csv_line(cells: list[str]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue().encode()


# ------------------------------------------------------------------ JSON Lines

JSON_BAD = {  # a JSON value that is no value of the type
    INT: st.sampled_from([True, 1.5, "abc", [1], {"a": 1}, 2**64, -(2**64), "__HUGE__"]),
    DECIMAL: st.sampled_from([True, "abc", [1], Decimal("1.005"), Decimal("1e12"), "NaN"]),
    FLOAT: st.sampled_from([True, "abc", [1.0], {"x": 1}]),
    DATE: st.sampled_from([20240101, "2024-13-01", "0000-01-01", True, "10000-01-01"]),
    BOOL: st.sampled_from([2, "maybe", 0.5, [True]]),
    STRING: st.sampled_from([5, True, [1], {"a": "b"}, 1.5]),
}


def json_value(value, col: Column):
    if value is None:
        return None
    if col.type == DATE:
        return value.isoformat()
    return value


def dumps(obj) -> str:
    """JSON text; a Decimal as a number (through float: our decimals have at most 15
    digits, which float's shortest repr keeps), "__HUGE__" as a 5000-digit integer and
    "__BIG__" as a 401-digit one."""
    text = json.dumps(obj, default=float, ensure_ascii=False)
    return text.replace('"__HUGE__"', "9" * 5000).replace('"__BIG__"', "1" + "0" * 400)


@st.composite
def jsonl_file(draw, name: str | None = None):
    """`batch.jsonl` (envelopes naming their relation) or `<rel>.jsonl` (flat rows)."""
    per_row = name is None and draw(st.booleans())
    rel0 = draw(st.sampled_from(RELATIONS))
    kinds = VALUE_KINDS + ["missing", "extra", "cut", "deep", "not_object", "utf8", "blank", "bad_op", "huge", "overflow"] + (
        ["unknown_relation"] if per_row else [])
    parts: list[tuple[bytes, Expect | None]] = []
    for _ in range(draw(st.integers(0, 12))):
        rel = draw(st.sampled_from(RELATIONS)) if per_row else rel0
        values, op, kind, col, _ = draw(row_spec(rel, kinds))
        row = {c.name: json_value(v, c) for v, c in zip(values, rel.columns, strict=True)}
        reason = None
        if kind in FIELD_DEFECTS:
            row[rel.columns[col].name] = draw(JSON_BAD[rel.columns[col].type])
            reason = "bad_value"
        elif kind == NULL_KEY:
            row[rel.columns[0].name] = None
            reason = "not_null"
        elif kind == "missing":
            del row[draw(st.sampled_from(rel.column_names))]
            reason = "missing_field"
        elif kind == "extra":
            row["zz_extra"] = 1
            reason = "unknown_field"
        elif kind == "huge" and any(c.type == STRING for c in rel.columns):
            name_ = next(c.name for c in rel.columns if c.type == STRING)
            row[name_] = "y" * 200_000
            values = tuple(row[name_] if c.name == name_ else v for v, c in zip(values, rel.columns, strict=True))
        elif kind == "overflow" and any(c.type == FLOAT for c in rel.columns):  # an integer past DOUBLE: inf
            name_ = next(c.name for c in rel.columns if c.type == FLOAT)
            row[name_] = "__BIG__"
            values = tuple(float("inf") if c.name == name_ else v for v, c in zip(values, rel.columns, strict=True))
        op_text = draw(st.sampled_from(["+", "insert", 1, "1"] if op > 0 else ["-", "delete", -1, 0, "0"]))
        if kind == "bad_op":
            op_text = draw(st.sampled_from(["x", 2, True, "++", [1]]))
            reason = "bad_op"
        named = rel.name
        if kind == "unknown_relation":
            named = draw(st.sampled_from(["nope", "order", "items2"]))
            reason = "unknown_relation"
        if per_row:
            obj = {"relation": named, "op": op_text, "row": row}
        else:
            obj = {"op": op_text, **row}
        text = dumps(obj)
        if kind == "cut":
            text = text[: draw(st.integers(1, len(text) - 1))]
            reason = "malformed"
        elif kind == "deep":
            text = "[" * 100_000
            reason = "malformed"
        elif kind == "not_object":
            text = dumps([1, 2]) if draw(st.booleans()) else '"text"'
            reason = "malformed"
        if kind == "blank":
            parts.append((draw(st.sampled_from([b"\n", b"  \n", b"\t\n"])), None))
            continue
        data = text.encode() + b"\n"
        if kind == "utf8":
            data = _corrupt(data, draw(st.integers(0, len(text))))
            reason = "malformed"
        relation = rel.name if reason not in ("unknown_relation",) else named
        if per_row and reason in ("malformed",):
            relation = None
        parts.append((data, Expect(0, relation, op, None if reason else _typed(values, rel), reason)))
    data, expect = _finish(parts, draw(st.booleans()))
    return Fuzzed(name or ("batch.jsonl" if per_row else f"{rel0.name}.jsonl"), data, expect)


# ------------------------------------------------------------------ Parquet

ARROW = {INT: pa.int64(), FLOAT: pa.float64(), STRING: pa.string(), DATE: pa.date32(), BOOL: pa.bool_()}


@st.composite
def parquet_file(draw, rel: Relation):
    """`<rel>.parquet`: typed columns (+ maybe op); rows with NULL keys, out-of-range
    dates, decimals beyond scale or precision; a mistyped, missing or extra column."""
    n = draw(st.integers(0, 10))
    rows = [draw(tuples(rel, st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\\"), max_size=12)))
            for _ in range(n)]
    date_bad = [False] * n
    ops = [draw(st.sampled_from([1, 1, -1])) for _ in range(n)]
    reasons: list[str | None] = [None] * n
    columns: dict[str, pa.Array] = {}
    file_problem = draw(st.sampled_from([None] * 6 + ["missing", "extra", "mistyped"]))
    for ci, col in enumerate(rel.columns):
        values = [r[ci] for r in rows]
        if col.type == DECIMAL:
            wide = draw(st.booleans())  # a wider decimal type: values beyond (10,2) fit in it
            type_ = pa.decimal128(20, 4) if wide else pa.decimal128(col.precision, col.scale)
            if wide:
                for i in range(n):
                    if reasons[i] is None and draw(st.integers(0, 5)) == 0:
                        values[i] = draw(st.sampled_from([Decimal("1.2345"), Decimal("123456789.5"), Decimal("-0.001")]))
                        reasons[i] = "bad_value"
            columns[col.name] = pa.array(values, type_)
        elif col.type == DATE:
            days = [None if v is None else (v - DAY0).days for v in values]
            for i in range(n):
                if reasons[i] is None and col.nullable and draw(st.integers(0, 5)) == 0:
                    days[i] = draw(st.sampled_from([2932897, 3_000_000, -719163, -2_000_000]))
                    date_bad[i] = True
            columns[col.name] = pa.array(days, pa.int32()).cast(pa.date32())
        else:
            if not col.nullable:
                for i in range(n):
                    if reasons[i] is None and draw(st.integers(0, 6)) == 0:
                        values[i] = None
                        reasons[i] = "not_null"
            columns[col.name] = pa.array(values, ARROW[col.type])
    if draw(st.booleans()):
        op_texts = [draw(st.sampled_from(["+", "insert"] if o > 0 else ["-", "delete"])) for o in ops]
        for i in range(n):
            if draw(st.integers(0, 6)) == 0:
                op_texts[i] = "x"
                reasons[i] = "bad_op"  # the op is read before the values
        columns["op"] = pa.array(op_texts, pa.string())
    else:
        ops = [1] * n
    if file_problem == "missing":
        del columns[draw(st.sampled_from(rel.column_names))]
        reasons = ["missing_field"] * n
    elif file_problem == "extra":
        columns["zz_extra"] = pa.array(list(range(n)), pa.int64())
        reasons = ["unknown_field"] * n
    elif file_problem == "mistyped":  # the string (or last) column as integers
        ci = next((i for i, c in enumerate(rel.columns) if c.type == STRING), rel.arity - 1)
        col = rel.columns[ci]
        columns[col.name] = pa.array([None if r[ci] is None else 5 for r in rows], pa.int64())
        for i in range(n):
            first = _first_bad(rel, rows[i], ci, reasons[i])
            reasons[i] = first
    if file_problem not in ("missing", "extra"):  # a value Python cannot hold is read first
        reasons = ["bad_value" if bad else r for bad, r in zip(date_bad, reasons, strict=True)]
    table = pa.table(columns)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    expect = [
        Expect(i + 1, rel.name, ops[i], None if reasons[i] else _typed(rows[i], rel), reasons[i]) for i in range(n)
    ]
    return Fuzzed(f"{rel.name}.parquet", buf.getvalue(), expect)


def _first_bad(rel: Relation, row: tuple, mistyped: int, reason: str | None) -> str | None:
    """The reason of a row of a file whose column `mistyped` has another type: its own
    reason stays when it has one (a bad op is read first; the other row defects are in
    other columns than the mistyped one, read in column order, all bad_value but a NULL
    key, which is column 0, read before)."""
    if reason is not None:
        return reason
    return "bad_value" if row[mistyped] is not None else None


# ------------------------------------------------------------------ files of any format


@st.composite
def unknown_relation_file(draw):
    """A file named after no relation: every row is `unknown_relation`."""
    fmt = draw(st.sampled_from(["jsonl", "tbl", "parquet"]))
    rel = draw(st.sampled_from(RELATIONS))
    rows = draw(st.lists(tuples(rel, PLAIN_TEXT), max_size=5))
    if fmt == "jsonl":
        data = "".join(dumps({c.name: json_value(v, c) for v, c in zip(r, rel.columns, strict=True)}) + "\n" for r in rows).encode()
    elif fmt == "tbl":
        data = "".join("|".join(draw(as_text(v, c)) for v, c in zip(r, rel.columns, strict=True)) + "\n" for r in rows).encode()
    else:
        buf = io.BytesIO()
        pq.write_table(pa.table({c.name: pa.array([r[i] for r in rows], ARROW.get(c.type, pa.decimal128(10, 2)))
                                 for i, c in enumerate(rel.columns)}), buf)
        data = buf.getvalue()
    expect = [Expect(i + 1, "nope", reason="unknown_relation") for i in range(len(rows))]
    return Fuzzed(f"nope.{fmt}", data, expect, {e.line: 0 for e in expect})


@st.composite
def empty_file(draw):
    name = draw(st.sampled_from(["orders.csv", "items.tbl", "orders.jsonl", "batch.jsonl", "items.csv"]))
    return Fuzzed(name, draw(st.sampled_from([b"", b"\n", b"\n\n"])), [])


@st.composite
def any_file(draw):
    rel = draw(st.sampled_from(RELATIONS))
    return draw(st.one_of(
        dbtoaster_file(rel), csv_file(rel), jsonl_file(), parquet_file(rel), unknown_relation_file(), empty_file(),
    ))
