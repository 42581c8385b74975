"""The vectorized fast path of the parse stage: a whole file read and converted by Arrow
(C++), column by column, instead of row by row in Python. Taken only where it gives
exactly what the row-by-row readers (formats.py) give, and only for files whose rows are
all valid inserts; any doubt returns None and the file goes the row-by-row way, which
alone decides rejections.

Eligible: a CSV file, a static DBToaster file (`.tbl`-like: bare tuples, `|`-separated)
and a Parquet file, each a unit of its own with a known relation. Not eligible: blank
lines (line numbers would shift), deletes (their raw text is kept for the liveness
check), any value Arrow will not cast (safe casts only: no rounding, no overflow), NULL in
a NOT NULL column, a header or Parquet schema that is not exactly the relation's columns
(+ op). Where Arrow and parse_value could disagree, the fast path is stricter: it refuses
(e.g. dates other than YYYY-MM-DD, booleans other than true/false/1/0), never accepts
more.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

from cumulus.ingest.dbtoaster import NULL_TEXT
from cumulus.ingest.formats import Codec
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, STRING, Column

if TYPE_CHECKING:
    import pyarrow as pa

    from cumulus.ingest.plan import Unit

INSERT_OPS = {"", "+", "+1", "1", "insert", "i"}
BATCH = 65536


def fast_batches(unit: Unit, codec: Codec, target: pa.Schema) -> list[pa.RecordBatch] | None:
    """The unit's rows as record batches of `target` (the working columns, then the
    relation's), or None when the fast path does not apply."""
    if unit.interleave or len(unit.files) != 1:
        return None
    file = unit.files[0]
    try:
        if file.fmt == "csv":
            table, first_line = _read_csv(Path(file.path), codec)
        elif file.fmt == "dbtoaster" and file.static:
            table, first_line = _read_static(Path(file.path), codec)
        elif file.fmt == "parquet":
            table, first_line = _read_parquet(Path(file.path), codec)
        else:
            return None
        if table is None:
            return None
        columns = [_convert(table.column(name), col) for name, col in zip(codec.names, codec.relation.columns, strict=True)]
    except Exception:  # noqa: BLE001 - any failure means: take the row-by-row path
        return None
    if any(c is None for c in columns):
        return None
    return _batches(unit.index, file.index, codec, columns, first_line, target)


def _count_lines(data: bytes) -> tuple[int, bool]:
    """(lines, has blank lines)."""
    if not data:
        return 0, False
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    normalized = data.replace(b"\r\n", b"\n")
    blank = normalized.startswith(b"\n") or b"\n\n" in normalized
    return lines, blank


def _read_csv(path: Path, codec: Codec):
    import pyarrow.csv as pcsv

    data = path.read_bytes()
    lines, blank = _count_lines(data)
    if blank or lines < 2:
        return None, 0
    first = data.split(b"\n", 1)[0].decode("utf-8").rstrip("\r")
    delimiter = "," if "," in first else ("|" if "|" in first else ("\t" if "\t" in first else ","))
    names = [n.strip().lower() for n in next(csv.reader([first], delimiter=delimiter))]
    if sorted(n for n in names if n != "op") != sorted(codec.names) or len(set(names)) != len(names):
        return None, 0
    table = pcsv.read_csv(
        io.BytesIO(data),
        read_options=pcsv.ReadOptions(column_names=names, skip_rows=1),
        parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=False),
        convert_options=pcsv.ConvertOptions(
            column_types={n: _pa().string() for n in names},
            null_values=[NULL_TEXT],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    if table.num_rows != lines - 1 or not _inserts_only(table, names):
        return None, 0
    return table, 2


def _read_static(path: Path, codec: Codec):
    import pyarrow.csv as pcsv

    if codec.relation.arity < 2:
        return None, 0
    data = path.read_bytes()
    lines, blank = _count_lines(data)
    if blank or lines == 0:
        return None, 0
    first = data.split(b"\n", 1)[0].decode("utf-8").rstrip("\r")
    fields = first.split("|")
    trailing = len(fields) == codec.relation.arity + 1 and fields[-1] == ""
    if "|" not in first or (len(fields) != codec.relation.arity and not trailing):
        return None, 0
    names = list(codec.names) + (["__trailing"] if trailing else [])
    table = pcsv.read_csv(
        io.BytesIO(data),
        read_options=pcsv.ReadOptions(column_names=names),
        parse_options=pcsv.ParseOptions(delimiter="|", quote_char=False, newlines_in_values=False),
        convert_options=pcsv.ConvertOptions(
            column_types={n: _pa().string() for n in names},
            null_values=[NULL_TEXT],
            strings_can_be_null=True,
        ),
    )
    if table.num_rows != lines:
        return None, 0
    if trailing:
        import pyarrow.compute as pc

        rest = table.column("__trailing")
        if rest.null_count or not pc.all(pc.equal(rest, "")).as_py():
            return None, 0
    return table, 1


def _read_parquet(path: Path, codec: Codec):
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    names = [n.lower() for n in table.column_names]
    table = table.rename_columns(names)
    if sorted(n for n in names if n != "op") != sorted(codec.names) or len(set(names)) != len(names):
        return None, 0
    if not _inserts_only(table, names):
        return None, 0
    return table, 1


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
    return out


def _batches(unit: int, file_index: int, codec: Codec, columns, first_line: int, target):
    import numpy as np
    import pyarrow as pa

    n = len(columns[0])
    batches = []
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        meta = [
            pa.array(np.full(size, unit, dtype=np.int32)),
            pa.array(np.arange(start, start + size, dtype=np.int64)),
            pa.array(np.full(size, file_index, dtype=np.int32)),
            pa.array(np.arange(start + first_line, start + first_line + size, dtype=np.int64)),
            pa.array([codec.relation.name] * size, pa.string()),
            pa.array(np.ones(size, dtype=np.int32)),
            pa.nulls(size, pa.string()),
            pa.nulls(size, pa.string()),
            pa.nulls(size, pa.string()),
        ]
        values = [c.slice(start, size) for c in columns]
        batches.append(pa.RecordBatch.from_arrays(meta + values, schema=target))
    return batches
