"""Reader for the DBToaster event-stream folders (shared/data/dbtoaster/README.md): one
`<relation>.csv` (or `.dat`) per relation, `|`- or comma-separated. A row with two
extra leading columns is an event (event-order number, 1 insert / 0 delete); a row with
exactly the relation's columns is static data loaded before the stream. Used by the
reference interpreter's CLI and by tests; rows become typed `Event`s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cumulus.errors import EventFormatError
from cumulus.m3.interpreter import Event
from cumulus.schema import STRING, Relation, Schema, parse_value

NULL_TEXT = "\\N"  # how a NULL field is written (as PostgreSQL's COPY and Hive do)


@dataclass(frozen=True)
class StreamRow:
    order: int  # event-order number; -1 for static rows
    event: Event
    file: str
    line: int


def parse_fields(fields: list[str], relation: Relation, where: str) -> tuple:
    """Typed values of one tuple; `\\N`, or an empty field of a non-string column, is NULL."""
    values = []
    for text, col in zip(fields, relation.columns, strict=True):
        if text == NULL_TEXT or (text == "" and col.type != STRING):
            values.append(None)
            continue
        try:
            values.append(parse_value(text, col.type))
        except ValueError as exc:
            raise EventFormatError(f"{where}: column {col.name} ({col.type}): {exc}") from None
    return tuple(values)


EVENT_SUFFIXES = (".csv", ".dat", ".tbl")  # DBToaster's data files; dbgen writes .tbl


def relation_files(folder: Path, schema: Schema) -> dict[str, Path]:
    """`<relation>.csv|.dat|.tbl` files of the folder that name a schema relation
    (`*_active.csv` snapshots are not events and are skipped)."""
    files: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix not in EVENT_SUFFIXES or path.stem.endswith("_active"):
            continue
        if path.stem.lower() in schema:
            files[path.stem.lower()] = path
    return files


def read_file(path: Path, relation: Relation) -> list[StreamRow]:
    rows: list[StreamRow] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            sep = "|" if "|" in line else ","
            fields = line.split(sep)
            where = f"{path}:{lineno}"
            if len(fields) == relation.arity + 1 and fields[-1] == "":
                fields = fields[:-1]  # dbgen-style trailing separator
            if len(fields) == relation.arity:
                values = parse_fields(fields, relation, where)
                rows.append(StreamRow(-1, Event("+", relation.name, values), str(path), lineno))
            elif len(fields) == relation.arity + 2:
                try:
                    order, flag = int(fields[0]), fields[1]
                except ValueError:
                    raise EventFormatError(f"{where}: the event-order number {fields[0]!r} is not an integer") from None
                if flag not in ("0", "1"):
                    raise EventFormatError(f"{where}: the operation flag {flag!r} is neither 1 (insert) nor 0 (delete)")
                values = parse_fields(fields[2:], relation, where)
                rows.append(StreamRow(order, Event("+" if flag == "1" else "-", relation.name, values), str(path), lineno))
            else:
                raise EventFormatError(
                    f"{where}: {len(fields)} fields; relation {relation.name} has {relation.arity} columns "
                    f"(or {relation.arity + 2} with the event-order number and operation flag)"
                )
    return rows


def read_stream(folder: str | Path, schema: Schema) -> list[StreamRow]:
    """All rows of a folder, static rows first, then events by event-order number (ties
    keep the relations' schema order, then line order)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EventFormatError(f"{folder} is not a folder of <relation>.csv|.dat|.tbl event files")
    files = relation_files(folder, schema)
    if not files:
        raise EventFormatError(f"{folder} holds no <relation>.csv|.dat|.tbl file for the schema's relations ({', '.join(schema.names)})")
    rank = {name: i for i, name in enumerate(schema.names)}
    rows = [row for name, path in files.items() for row in read_file(path, schema.relation(name))]
    rows.sort(key=lambda r: (r.order, rank[r.event.relation], r.line))
    return rows


def read_events(folder: str | Path, schema: Schema) -> list[Event]:
    return [r.event for r in read_stream(folder, schema)]
