"""Readers of the landing formats: each turns one file into `Record`s (a relation, +1/-1,
typed values, the line) or rejected records with a reason. Pure Python, no Spark: the
ingest job runs them inside its parse tasks, tests call them directly.

    jsonl      {"relation": "orders", "op": "+", "row": {...}}        (any relation), or
               {"op": "-", "o_orderkey": 1, ...} in <relation>.jsonl  (one relation)
    csv        a header of column names (+ optional `op`); <relation>.csv or --relation
    parquet    columns named like the relation's (+ optional `op`), same naming
    dbtoaster  <relation>.csv|.dat|.tbl without header, `|`-separated: event-order number,
               1 (insert) / 0 (delete), then the tuple; rows with only the tuple are static
               inserts (cumulus/ingest/dbtoaster.py, shared/data/dbtoaster/README.md)

`op` may be +, -, +1, -1, 1, 0, insert, delete (absent: insert). Lines are 1-based;
Parquet rows are numbered from 1 in place of lines.
"""

from __future__ import annotations

import csv
import json
import operator
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import NamedTuple

from cumulus.ingest.validate import Rejected, parse_op, text_converter, value_converter
from cumulus.schema import Relation, Schema

FORMATS = ("jsonl", "csv", "parquet", "dbtoaster")
EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".dat": "dbtoaster",
    ".tbl": "dbtoaster",
    ".csv": None,  # a header line makes it csv, else dbtoaster (see detect_format)
}
STATIC_ORDER = -1  # the event-order number of DBToaster static rows: before the stream
# A string column has no length limit: csv's default field limit (128 KiB) would end the
# file's parse with csv.Error at the first longer field. The limit is process-wide.
csv.field_size_limit(2**31 - 1)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Record(NamedTuple):
    relation: str | None
    op: int  # +1 insert, -1 delete (0 when unknown, on rejected rows)
    values: tuple | None  # typed values; None on rejected rows
    line: int
    raw: str | None  # the input text; kept for rejected rows and deletes only
    reason: str | None = None
    detail: str | None = None
    order: int = 0  # DBToaster event-order number


class Codec:
    """A relation's converters, built once per file."""

    def __init__(self, relation: Relation):
        self.relation = relation
        self.names = relation.column_names
        self.index = {name: i for i, name in enumerate(self.names)}
        self.from_text = [text_converter(c) for c in relation.columns]
        self.from_value = [value_converter(c) for c in relation.columns]

    def texts(self, fields: list[str]) -> tuple:
        """Typed values of a row of text fields (as many as the relation has columns)."""
        return tuple(map(operator.call, self.from_text, fields))


def codecs(schema: Schema) -> dict[str, Codec]:
    return {r.name: Codec(r) for r in schema.relations}


def relation_of_file(path: str | Path, schema: Schema) -> str | None:
    """The relation a file is named after: `orders.csv`, `orders.part-3.parquet` -> orders."""
    stem = Path(path).name.split(".", 1)[0].lower()
    return stem if stem in schema else None


def detect_format(path: str | Path, schema: Schema) -> str | None:
    """The format of a file from its extension; a .csv whose first line is a header of
    names (one of them a column or `op`) is csv, any other .csv is dbtoaster."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in EXTENSIONS:
        return None
    fmt = EXTENSIONS[suffix]
    if fmt is not None:
        return fmt
    columns = {c.name for r in schema.relations for c in r.columns} | {"op"}
    try:
        with path.open("rb") as fh:
            first = b""
            for raw in fh:
                if raw.strip():
                    first = raw
                    break
    except OSError:
        return "csv"
    text = first.decode("utf-8", "replace").strip()
    sep = "," if "," in text else ("|" if "|" in text else ",")
    names = [f.strip().strip('"').lower() for f in text.split(sep)]
    if names and all(_IDENT.match(n) for n in names) and columns & set(names):
        return "csv"
    return "dbtoaster"


def read_file(
    path: str | Path, fmt: str, schema: Schema, relation: str | None, codec_map: dict[str, Codec]
) -> Iterator[Record]:
    """The records of one file. `relation`: the relation the file holds (from --relation
    or its name), or None when its rows must name their own (jsonl) or it names none."""
    readers = {"jsonl": read_jsonl, "csv": read_csv, "parquet": read_parquet, "dbtoaster": read_dbtoaster}
    try:
        yield from readers[fmt](Path(path), schema, relation, codec_map)
    except OSError as exc:
        yield Record(relation, 0, None, 0, None, "malformed", f"cannot read {path}: {exc.strerror or exc}")


def _lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text without the line end, valid UTF-8?) for every line."""
    with path.open("rb") as fh:
        for number, data in enumerate(fh, 1):
            data = data.rstrip(b"\n").rstrip(b"\r")
            try:
                yield number, data.decode("utf-8"), True
            except UnicodeDecodeError:
                yield number, data.decode("utf-8", "replace"), False


def _unknown_relation(name: str | None, line: int, raw: str, path: Path) -> Record:
    detail = (
        f"no relation {name!r} in the schema" if name else f"cannot tell the relation of {path.name}: "
        "name the file <relation>.<ext>, give --relation, or name the relation in each row"
    )
    return Record(name, 0, None, line, raw, "unknown_relation", detail)


# ------------------------------------------------------------------ DBToaster


def _dbtoaster_fields(text: str, arity: int) -> tuple[list[str], int]:
    """The fields of a DBToaster line and its place in the stream: -1 for a static row,
    the event-order number for an event row, 0 when the line has neither shape. Depends
    on the line's shape only, never on its values (see dbtoaster_orders)."""
    fields = text.split("|" if "|" in text else ",")
    if len(fields) == arity + 1 and fields[-1] == "":
        fields = fields[:-1]  # dbgen-style trailing separator
    if len(fields) == arity:
        return fields, STATIC_ORDER
    if len(fields) == arity + 2:
        try:
            return fields, int(fields[0])
        except ValueError:
            return fields, 0
    return fields, 0


def dbtoaster_orders(path: str | Path, arity: int) -> Iterator[tuple[int, int]]:
    """(line, order) of every row of a DBToaster file, without reading its values: what
    read_dbtoaster would give as `line` and `order` (used to place a folder's other files
    when one relation's rows are parsed)."""
    for number, text, valid in _lines(Path(path)):
        if text:
            yield number, (_dbtoaster_fields(text, arity)[1] if valid else 0)


def read_dbtoaster(
    path: Path, schema: Schema, relation: str | None, codec_map: dict[str, Codec]
) -> Iterator[Record]:
    codec = codec_map.get(relation) if relation else None
    for number, text, valid in _lines(path):
        if not text:
            continue
        if not valid:
            yield Record(relation, 0, None, number, text, "malformed", "the line is not valid UTF-8")
            continue
        if codec is None:
            yield _unknown_relation(relation or Path(path).name.split(".", 1)[0], number, text, path)
            continue
        arity = codec.relation.arity
        fields, order = _dbtoaster_fields(text, arity)
        try:
            if len(fields) == arity:
                yield Record(codec.relation.name, 1, codec.texts(fields), number, None, order=order)
            elif len(fields) == arity + 2:
                if order == 0 and fields[0].strip() != "0":
                    try:
                        int(fields[0])
                    except ValueError:
                        raise Rejected("malformed", f"the event-order number {fields[0]!r} is not an integer") from None
                if fields[1] not in ("0", "1"):
                    raise Rejected("bad_op", f"the operation flag {fields[1]!r} is neither 1 (insert) nor 0 (delete)")
                op = 1 if fields[1] == "1" else -1
                values = codec.texts(fields[2:])
                yield Record(codec.relation.name, op, values, number, text if op < 0 else None, order=order)
            else:
                raise Rejected(
                    "column_count",
                    f"{len(fields)} fields; {codec.relation.name} has {arity} columns "
                    f"(or {arity + 2} with the event-order number and operation flag)",
                )
        except Rejected as rej:
            yield Record(codec.relation.name, 0, None, number, text, rej.reason, rej.detail, order=order)


# ------------------------------------------------------------------ JSON Lines


def read_jsonl(
    path: Path, schema: Schema, relation: str | None, codec_map: dict[str, Codec]
) -> Iterator[Record]:
    for number, text, valid in _lines(path):
        if not text.strip():
            continue
        rel_name = relation
        try:
            if not valid:
                raise Rejected("malformed", "the line is not valid UTF-8")
            try:
                obj = json.loads(text, parse_float=Decimal)
            except json.JSONDecodeError as exc:
                raise Rejected("malformed", f"not JSON: {exc.msg} at column {exc.colno}") from None
            except ValueError as exc:  # an integer of more digits than Python converts
                raise Rejected("bad_value", f"cannot read a number of the line: {exc}") from None
            except RecursionError:
                raise Rejected("malformed", "not JSON this reader takes: nested too deeply") from None
            if not isinstance(obj, dict):
                raise Rejected("malformed", f"a line must be a JSON object, not {type(obj).__name__}")
            obj = {str(k).lower(): v for k, v in obj.items()}
            if "row" in obj:  # envelope: {"relation": ..., "op": ..., "row": {...}}
                if "relation" in obj:
                    named = str(obj.pop("relation")).lower()
                    if relation is not None and named != relation:
                        raise Rejected(
                            "unknown_relation", f"the row names relation {named!r}; the file holds {relation}"
                        )
                    rel_name = named
                op_value = obj.pop("op", None)
                row = obj.pop("row")
                if obj:
                    raise Rejected("unknown_field", f"unknown key(s) {', '.join(sorted(obj))} next to row")
                if not isinstance(row, dict):
                    raise Rejected("malformed", "`row` must be a JSON object of column values")
                row = {str(k).lower(): v for k, v in row.items()}
            else:  # flat: {"op": ..., column: value, ...}
                op_value = obj.pop("op", None)
                if rel_name is None and "relation" in obj:
                    rel_name = str(obj.pop("relation")).lower()
                row = obj
            codec = codec_map.get(rel_name) if rel_name else None
            if codec is None:
                yield _unknown_relation(rel_name, number, text, path)
                continue
            op = parse_op(op_value)
            yield Record(codec.relation.name, op, _row_values(codec, row), number, text if op < 0 else None)
        except Rejected as rej:
            yield Record(rel_name, 0, None, number, text, rej.reason, rej.detail)


def _row_values(codec: Codec, row: dict) -> tuple:
    missing = [n for n in codec.names if n not in row]
    if missing:
        raise Rejected("missing_field", f"no value for column(s) {', '.join(missing)} of {codec.relation.name}")
    extra = [k for k in row if k not in codec.index]
    if extra:
        raise Rejected("unknown_field", f"{', '.join(extra)}: no such column in {codec.relation.name}")
    return tuple(conv(row[n]) for conv, n in zip(codec.from_value, codec.names, strict=True))


# ------------------------------------------------------------------ CSV


class _Header(NamedTuple):
    positions: list[int]  # of the relation's columns, in relation order
    op: int | None  # position of the op column
    width: int
    problem: Rejected | None  # a header problem rejects every row


def _header(fields: list[str], codec: Codec) -> _Header:
    names = [f.strip().lower() for f in fields]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return _Header([], None, len(names), Rejected("unknown_field", f"the header names {name} twice"))
        seen.add(name)
    op = names.index("op") if "op" in names else None  # `op` is no relation column (reserved)
    extra = [n for i, n in enumerate(names) if n not in codec.index and i != op]
    missing = [n for n in codec.names if n not in names]
    problem = None
    if missing:
        problem = Rejected("missing_field", f"the header has no column(s) {', '.join(missing)} of {codec.relation.name}")
    elif extra:
        problem = Rejected("unknown_field", f"header column(s) {', '.join(extra)}: no such column in {codec.relation.name}")
    positions = [names.index(n) for n in codec.names] if not problem else []
    return _Header(positions, op, len(names), problem)


def read_csv(
    path: Path, schema: Schema, relation: str | None, codec_map: dict[str, Codec]
) -> Iterator[Record]:
    codec = codec_map.get(relation) if relation else None
    lines = _PhysicalLines(_lines(path))
    reader = csv.reader(lines, delimiter=_delimiter(path))
    header: _Header | None = None
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a bare carriage return in an unquoted field
            number, raw, _ = lines.take()
            problem = Rejected("malformed", f"not a CSV record: {exc}")
            if header is None:  # every row of the file is in doubt
                header = _Header([], None, 0, Rejected("malformed", f"the header (line {number}) is not a CSV record: {exc}"))
            name = codec.relation.name if codec else relation
            yield Record(name, 0, None, number, raw, problem.reason, problem.detail)
            continue
        number, raw, valid = lines.take()
        if not fields or fields == [""]:
            continue
        if header is None:  # the first record is the header
            header = _header(fields, codec) if codec else _Header([], None, len(fields), None)
            continue
        if codec is None:
            yield _unknown_relation(relation or path.name.split(".", 1)[0], number, raw, path)
            continue
        try:
            if not valid:
                raise Rejected("malformed", "the line is not valid UTF-8")
            if header.problem:
                raise header.problem
            if len(fields) != header.width:
                raise Rejected("column_count", f"{len(fields)} fields; the header has {header.width}")
            op = parse_op(fields[header.op]) if header.op is not None else 1
            values = codec.texts([fields[i] for i in header.positions])
            yield Record(codec.relation.name, op, values, number, raw if op < 0 else None)
        except Rejected as rej:
            yield Record(codec.relation.name, 0, None, number, raw, rej.reason, rej.detail)


def _delimiter(path: Path) -> str:
    """`,` unless the header line has no comma but has `|` or a tab."""
    with path.open("rb") as fh:
        for data in fh:
            if data.strip():
                text = data.decode("utf-8", "replace")
                if "," in text:
                    return ","
                return "|" if "|" in text else ("\t" if "\t" in text else ",")
    return ","


class _PhysicalLines:
    """Feeds csv.reader line by line and remembers which physical lines (and raw text)
    the last record used, so a quoted field spanning lines keeps its first line number."""

    def __init__(self, lines: Iterator[tuple[int, str, bool]]):
        self._lines = lines
        self._used: list[tuple[int, str, bool]] = []

    def __iter__(self):
        return self

    def __next__(self) -> str:
        item = next(self._lines)
        self._used.append(item)
        return item[1] + "\n"

    def take(self) -> tuple[int, str, bool]:
        used, self._used = self._used, []
        if not used:
            return 0, "", True
        return used[0][0], "\n".join(t for _, t, _ in used), all(v for _, _, v in used)


# ------------------------------------------------------------------ Parquet


def read_parquet(
    path: Path, schema: Schema, relation: str | None, codec_map: dict[str, Codec]
) -> Iterator[Record]:
    import pyarrow.parquet as pq

    codec = codec_map.get(relation) if relation else None
    try:
        pfile = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one malformed record
        yield Record(relation, 0, None, 0, None, "malformed", f"not a readable Parquet file: {exc}")
        return
    names = [n.lower() for n in pfile.schema_arrow.names]
    problem = None
    if codec is not None:
        missing = [n for n in codec.names if n not in names]
        extra = [n for n in names if n not in codec.index and n != "op"]
        if missing:
            problem = Rejected("missing_field", f"no column(s) {', '.join(missing)} of {codec.relation.name}")
        elif extra:
            problem = Rejected("unknown_field", f"column(s) {', '.join(extra)}: no such column in {codec.relation.name}")
    number = 0
    for batch in pfile.iter_batches(batch_size=8192):
        batch_names = [n.lower() for n in batch.schema.names]
        for row in _parquet_rows(batch):
            number += 1
            bad_row = row if isinstance(row, _BadRow) else None  # a value Python cannot hold
            if bad_row is None:
                row = dict(zip(batch_names, row.values(), strict=True))
            raw = bad_row.raw if bad_row else _json(row)
            if codec is None:
                yield _unknown_relation(relation or path.name.split(".", 1)[0], number, raw, path)
                continue
            try:
                if problem:
                    raise problem
                if bad_row:
                    raise Rejected("bad_value", bad_row.detail)
                op = parse_op(row.get("op"))
                values = tuple(conv(row[n]) for conv, n in zip(codec.from_value, codec.names, strict=True))
                yield Record(codec.relation.name, op, values, number, raw if op < 0 else None)
            except Rejected as rej:
                yield Record(codec.relation.name, 0, None, number, raw, rej.reason, rej.detail)


class _BadRow(NamedTuple):
    raw: str  # the row as JSON of its values' Arrow text
    detail: str


def _parquet_rows(batch) -> list:
    """The batch's rows as dicts; a row with a value Python cannot represent (a date32
    outside years 1-9999, a timestamp past datetime's range) becomes a _BadRow naming
    the column."""
    try:
        return batch.to_pylist()
    except (OverflowError, ValueError):
        pass
    rows: list = []
    for i in range(batch.num_rows):
        one = batch.slice(i, 1)
        try:
            rows.append(one.to_pylist()[0])
            continue
        except (OverflowError, ValueError):
            pass
        texts, bad = {}, []
        for name, column in zip(one.schema.names, one.columns, strict=True):
            try:
                column.to_pylist()
            except (OverflowError, ValueError):
                bad.append(f"{name} ({column.type})")
            texts[name] = column.cast("string")[0].as_py()
        rows.append(_BadRow(_json(texts), f"column(s) {', '.join(bad)}: out of the range this reader takes (dates: years 1 to 9999)"))
    return rows


def _json(row: dict) -> str:
    return json.dumps(row, default=str, ensure_ascii=False)
