"""The vectorized fast path of the parse stage: a file read and converted by Arrow (C++),
column by column, instead of row by row in Python. Taken only where it gives exactly what
the row-by-row readers (formats.py) give, and only for rows that are all valid inserts;
any doubt leaves those rows to the row-by-row way, which alone decides rejections.

A file is read in chunks of whole lines (CHUNK_BYTES; a Parquet file in row batches), so
a file of any size streams through in bounded memory. Each chunk is decided on its own:
- taken: its rows become record batches here;
- a value in doubt (a delete, a value Arrow will not cast, NULL in a NOT NULL column):
  the chunk's rows are left to the row readers (`Leave` with a part file holding only
  them), and the next chunk is decided afresh;
- its shape in doubt (a blank line, or not one row per line: the row readers' positions
  would no longer be the line numbers): the rest of the file is left to the row readers.

Eligible: a CSV file, a static DBToaster file (`.tbl`-like: bare tuples, `|`-separated)
and a Parquet file, each a unit of its own with a known relation, whose header or Parquet
schema is exactly the relation's columns (+ op); anything else returns None. Where Arrow
and parse_value could disagree, the fast path is stricter: it leaves the rows (e.g. dates
other than YYYY-MM-DD, booleans other than true/false/1/0), never accepts more.
"""

from __future__ import annotations

import csv
import io
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cumulus.ingest.dbtoaster import NULL_TEXT
from cumulus.ingest.formats import Codec
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, STRING, Column

if TYPE_CHECKING:
    import pyarrow as pa

    from cumulus.ingest.plan import InputFile, Unit

INSERT_OPS = {"", "+", "+1", "1", "insert", "i"}
BATCH = 65536
CHUNK_BYTES = 64 << 20  # text read per chunk (whole lines)
PARQUET_ROWS = 1 << 20  # Parquet rows per chunk


@dataclass(frozen=True)
class Leave:
    """Rows the fast path leaves to the row readers, from position `start` of the unit:
    with `part`, the rows of that file (the same format, holding only them; its line
    numbers + `line_shift` are the original's), valid until the next segment is asked
    for; without, every row of the original file from `start` on."""

    start: int
    part: Path | None = None
    line_shift: int = 0


def fast_segments(unit: Unit, codec: Codec, target: pa.Schema, chunk_bytes: int = CHUNK_BYTES) -> Iterator | None:
    """The unit's rows as record batches of `target` (the working columns, then the
    relation's) and `Leave`s, in position order; None when the fast path does not apply
    to the file at all."""
    if unit.interleave or len(unit.files) != 1:
        return None
    file = unit.files[0]
    path = Path(file.path)
    try:
        if file.fmt == "csv":
            shape = _csv_shape(path, codec)
        elif file.fmt == "dbtoaster" and file.static:
            shape = _static_shape(path, codec)
        elif file.fmt == "parquet":
            return _parquet_segments(unit, file, codec, target)
        else:
            return None
    except Exception:  # noqa: BLE001 - any failure means: take the row-by-row path
        return None
    if shape is None:
        return None
    return _text_segments(unit, file, codec, target, shape, chunk_bytes)


@dataclass(frozen=True)
class _TextShape:
    header: bytes  # the CSV header line as read (b"" for DBToaster)
    names: list[str]  # column names of a chunk's table
    delimiter: str
    quoted: bool  # CSV quoting (DBToaster has none)
    trailing: bool  # a dbgen-style trailing `|` on every line


def _first_line(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.readline()


def _csv_shape(path: Path, codec: Codec) -> _TextShape | None:
    raw = _first_line(path)
    first = raw.decode("utf-8").rstrip("\n").rstrip("\r")
    if not first.strip():
        return None
    delimiter = "," if "," in first else ("|" if "|" in first else ("\t" if "\t" in first else ","))
    names = [n.strip().lower() for n in next(csv.reader([first], delimiter=delimiter))]
    if sorted(n for n in names if n != "op") != sorted(codec.names) or len(set(names)) != len(names):
        return None
    return _TextShape(raw, names, delimiter, True, False)


def _static_shape(path: Path, codec: Codec) -> _TextShape | None:
    if codec.relation.arity < 2:
        return None
    first = _first_line(path).decode("utf-8").rstrip("\n").rstrip("\r")
    fields = first.split("|")
    trailing = len(fields) == codec.relation.arity + 1 and fields[-1] == ""
    if "|" not in first or (len(fields) != codec.relation.arity and not trailing):
        return None
    return _TextShape(b"", list(codec.names) + (["__trailing"] if trailing else []), "|", False, trailing)


def _chunks(path: Path, skip: int, size: int) -> Iterator[bytes]:
    """The file's bytes from offset `skip` in chunks of whole lines (the last one may
    lack its line end)."""
    with path.open("rb") as fh:
        fh.seek(skip)
        rest = b""
        while block := fh.read(size):
            data = rest + block
            cut = data.rfind(b"\n") + 1
            if cut:
                yield data[:cut]
            rest = data[cut:]
        if rest:
            yield rest


def _guarded(items: Iterator) -> Iterator:
    """The items, then None in place of an error reading the next one."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except Exception:  # noqa: BLE001 - a file that cannot be read on
            yield None
            return
        yield item


def _count_lines(data: bytes) -> tuple[int, bool]:
    """(lines, has blank lines)."""
    if not data:
        return 0, False
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    normalized = data.replace(b"\r\n", b"\n")
    blank = normalized.startswith(b"\n") or b"\n\n" in normalized
    return lines, blank


def _read_chunk(data: bytes, shape: _TextShape):
    """The chunk as a table of strings, or None when it is not one row per line."""
    import pyarrow.csv as pcsv

    lines, blank = _count_lines(data)
    if blank:
        return None
    table = pcsv.read_csv(
        io.BytesIO(data),
        read_options=pcsv.ReadOptions(column_names=shape.names),
        parse_options=pcsv.ParseOptions(delimiter=shape.delimiter, quote_char='"' if shape.quoted else False,
                                        newlines_in_values=False),
        convert_options=pcsv.ConvertOptions(
            column_types={n: _pa().string() for n in shape.names},
            null_values=[NULL_TEXT],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    return table if table.num_rows == lines else None


def _text_segments(unit: Unit, file: InputFile, codec: Codec, target, shape: _TextShape, chunk_bytes: int):
    path = Path(file.path)
    pos, line = 0, 1 + (1 if shape.header else 0)  # the first row's position and line number
    with tempfile.TemporaryDirectory(prefix="cumulus-fastpath-") as tmp:
        for data in _guarded(_chunks(path, len(shape.header), chunk_bytes)):
            if data is None:  # the file cannot be read on: the row readers say why
                yield Leave(pos)
                return
            try:
                table = _read_chunk(data, shape)
            except Exception:  # noqa: BLE001 - Arrow cannot split it into rows: its shape is in doubt
                table = None
            if table is None:
                yield Leave(pos)
                return
            columns = _columns(table, codec, list(shape.names)) if _trailing_empty(table, shape) else None
            if columns is None:
                part = Path(tmp) / path.name
                part.write_bytes(shape.header + data)
                yield Leave(pos, part, line - (2 if shape.header else 1))
            else:
                yield from _batches(unit.index, file.index, codec, columns, pos, line, target)
            pos, line = pos + table.num_rows, line + table.num_rows


def _trailing_empty(table, shape: _TextShape) -> bool:
    if not shape.trailing:
        return True
    import pyarrow.compute as pc

    rest = table.column("__trailing")
    return not rest.null_count and pc.all(pc.equal(rest, "")).as_py() is not False


def _columns(table, codec: Codec, names: list[str]) -> list | None:
    """The relation's columns of a chunk's table, converted, or None when a value (or an
    op) is in doubt."""
    if not _inserts_only(table, names):
        return None
    try:
        columns = [_convert(table.column(name), col) for name, col in zip(codec.names, codec.relation.columns, strict=True)]
    except Exception:  # noqa: BLE001 - a value Arrow will not cast: the row path decides
        return None
    return None if any(c is None for c in columns) else columns


def _parquet_segments(unit: Unit, file: InputFile, codec: Codec, target):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.ParquetFile(file.path)
    names = [n.lower() for n in source.schema_arrow.names]
    if sorted(n for n in names if n != "op") != sorted(codec.names) or len(set(names)) != len(names):
        return None

    def segments():
        pos = 0
        with tempfile.TemporaryDirectory(prefix="cumulus-fastpath-") as tmp:
            for batch in _guarded(source.iter_batches(batch_size=PARQUET_ROWS)):
                if batch is None:
                    yield Leave(pos)
                    return
                table = pa.Table.from_batches([batch])
                columns = _columns(table.rename_columns(names), codec, names)
                if columns is None:
                    part = Path(tmp) / Path(file.path).name
                    pq.write_table(table, part)
                    yield Leave(pos, part, pos)
                else:
                    yield from _batches(unit.index, file.index, codec, columns, pos, pos + 1, target)
                pos += table.num_rows

    return segments()


def _inserts_only(table, names) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    if "op" not in names:
        return True
    ops = table.column("op")
    if pa.types.is_integer(ops.type):
        return ops.null_count == 0 and pc.all(pc.equal(ops, 1)).as_py() is not False
    if not (pa.types.is_string(ops.type) or pa.types.is_large_string(ops.type) or str(ops.type) == "string_view"):
        return False
    ops = pc.utf8_lower(pc.utf8_trim_whitespace(ops.cast(pa.string())))
    ok = pc.is_in(pc.fill_null(ops, ""), value_set=pa.array(sorted(INSERT_OPS)))
    return pc.all(ok).as_py() is not False


def _pa():
    import pyarrow as pa

    return pa


def _target_type(col: Column):
    pa = _pa()
    return {
        INT: pa.int64(),
        FLOAT: pa.float64(),
        STRING: pa.string(),
        DATE: pa.date32(),
        BOOL: pa.bool_(),
    }.get(col.type) or pa.decimal128(col.precision or 38, col.scale if col.scale is not None else 10)


def _convert(arr, col: Column):
    """The column as its stored type, or None when only the row path may decide."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    target = _target_type(col)
    kind = arr.type
    is_text = pa.types.is_string(kind) or pa.types.is_large_string(kind) or str(kind) == "string_view"
    if is_text:
        arr = arr.cast(pa.string())
        if pc.any(pc.equal(arr, NULL_TEXT)).as_py():  # a quoted \N: the row path decides
            return None
        if col.type == STRING:
            out = arr
        else:
            arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, pa.string()), arr)
            if col.type == BOOL:
                lowered = pc.utf8_lower(arr)
                if not pc.all(pc.fill_null(pc.is_in(lowered, value_set=pa.array(["true", "false", "1", "0"])), True)).as_py():
                    return None
                arr = lowered
            if col.type == DATE:  # exactly YYYY-MM-DD, as both readers take it
                shape = pc.match_substring_regex(arr, r"^\d{4}-\d{2}-\d{2}$")
                if not pc.all(pc.fill_null(shape, True)).as_py():
                    return None
            if col.type == INT:  # digits with an optional sign: nothing Arrow reads differently
                shape = pc.match_substring_regex(arr, r"^[+-]?\d+$")
                if not pc.all(pc.fill_null(shape, True)).as_py():
                    return None
            if col.type in (DECIMAL, FLOAT):
                shape = pc.match_substring_regex(arr, r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
                if not pc.all(pc.fill_null(shape, True)).as_py():
                    return None
            out = arr.cast(target)  # safe: raises on overflow or lost digits
    elif col.type == STRING or pa.types.is_boolean(kind) != (col.type == BOOL):
        return None
    elif col.type == INT and pa.types.is_integer(kind):
        out = arr.cast(target)
    elif col.type == DECIMAL and (pa.types.is_decimal(kind) or pa.types.is_integer(kind)):
        out = arr.cast(target)
    elif col.type == FLOAT and (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        out = arr.cast(target)
    elif col.type == DATE and pa.types.is_date(kind):
        out = arr.cast(target)
    elif col.type == BOOL:
        out = arr
    else:
        return None
    if not col.nullable and out.null_count:
        return None
    if col.type == DATE and not _dates_in_range(out):  # Arrow takes year 0 and past 9999
        return None
    return out


DAYS = (-719162, 2932896)  # 0001-01-01 and 9999-12-31 as days since 1970-01-01: Python's dates


def _dates_in_range(arr) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    days = pc.min_max(arr.cast(pa.int32()))
    lo, hi = days["min"].as_py(), days["max"].as_py()
    return lo is None or (DAYS[0] <= lo and hi <= DAYS[1])


def _batches(unit: int, file_index: int, codec: Codec, columns, pos: int, line: int, target) -> Iterator:
    """Record batches of converted columns whose first row has position `pos` in the unit
    and line number `line` in its file."""
    import numpy as np
    import pyarrow as pa

    n = len(columns[0])
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        meta = [
            pa.array(np.full(size, unit, dtype=np.int32)),
            pa.array(np.arange(pos + start, pos + start + size, dtype=np.int64)),
            pa.array(np.full(size, file_index, dtype=np.int32)),
            pa.array(np.arange(line + start, line + start + size, dtype=np.int64)),
            pa.array([codec.relation.name] * size, pa.string()),
            pa.array(np.ones(size, dtype=np.int32)),
            pa.nulls(size, pa.string()),
            pa.nulls(size, pa.string()),
            pa.nulls(size, pa.string()),
        ]
        values = [c.slice(start, size) for c in columns]
        yield pa.RecordBatch.from_arrays(meta + values, schema=target)
