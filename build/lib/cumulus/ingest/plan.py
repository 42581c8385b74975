"""What an ingest batch reads: the paths given (files or folders) become input files with
a format, a relation, a size and a content checksum, grouped into parse units.

A unit is parsed by one task and numbers its rows in order (`pos`): a JSON Lines, CSV or
Parquet file is one unit (rows in file order); the DBToaster event files of one folder
form one unit whose rows are ordered by event-order number, then relation (schema
order), then line: events of several relations that share an event-order number still
get a total order. A DBToaster file whose first row has no event columns (static data,
e.g. dbgen/tpchgen `.tbl` files) is a unit of its own, placed before its folder's event
unit (static rows load before the stream), so large static files parse in parallel.
Units keep the order of the paths given; files of a folder are sorted by name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from cumulus.errors import IngestError
from cumulus.ingest.formats import EXTENSIONS, FORMATS, detect_format, relation_of_file
from cumulus.schema import Schema


@dataclass(frozen=True)
class InputFile:
    index: int  # position in the batch
    path: str
    fmt: str
    relation: str | None  # None: the rows name their relation (or the file names none)
    size: int
    checksum: str
    unit: int = -1
    static: bool = False  # a DBToaster file of static rows (no event columns)


@dataclass(frozen=True)
class Unit:
    index: int
    files: tuple[InputFile, ...]
    interleave: bool  # DBToaster folder: order rows by event-order number


def sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def list_files(paths: list[Path], fmt: str | None, schema: Schema) -> list[tuple[Path, str]]:
    """(file, format) for every input file, in order. Folders are read recursively;
    hidden files, `_`-prefixed files (_SUCCESS), files with an extension no format
    uses, and DBToaster `*_active.*` snapshots are skipped."""
    found: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise IngestError(f"no such file or folder: {path}")
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if p.is_file())
            candidates = [
                p
                for p in candidates
                if not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
                and p.suffix.lower() in EXTENSIONS
            ]
        else:
            candidates = [path]
        for file in candidates:
            resolved = file.resolve()
            if resolved in seen:
                continue
            file_fmt = fmt or detect_format(file, schema)
            if file_fmt is None:
                raise IngestError(
                    f"cannot tell the format of {file} from its extension; give --format "
                    f"({', '.join(FORMATS)})"
                )
            if path.is_dir() and file_fmt == "dbtoaster" and file.stem.endswith("_active"):
                continue
            seen.add(resolved)
            found.append((resolved, file_fmt))
    return found


def is_static(path: str | Path, relation: str | None, schema: Schema) -> bool:
    """Whether a DBToaster file's first row is a bare tuple (no event-order number)."""
    if relation is None:
        return False
    arity = schema.relation(relation).arity
    with open(path, "rb") as fh:
        for data in fh:
            text = data.decode("utf-8", "replace").rstrip("\r\n")
            if text:
                fields = text.split("|" if "|" in text else ",")
                return len(fields) == arity or (len(fields) == arity + 1 and fields[-1] == "")
    return False


def plan_files(
    paths: list[Path], fmt: str | None, relation: str | None, schema: Schema
) -> list[InputFile]:
    """The batch's input files with checksums (read on the driver)."""
    files = []
    for index, (path, file_fmt) in enumerate(list_files(paths, fmt, schema)):
        file_relation = relation or relation_of_file(path, schema)
        files.append(
            InputFile(
                index=index,
                path=str(path),
                fmt=file_fmt,
                relation=file_relation,
                size=path.stat().st_size,
                checksum=sha256(path),
                static=file_fmt == "dbtoaster" and is_static(path, file_relation, schema),
            )
        )
    return files


def make_units(files: list[InputFile]) -> tuple[list[InputFile], list[Unit]]:
    """Group files into units (see the module doc); returns the files with their unit."""
    slots: list[InputFile | list[InputFile]] = []  # a file, or a folder's DBToaster files
    folders: dict[str, list[InputFile]] = {}
    for file in files:
        if file.fmt != "dbtoaster":
            slots.append(file)
            continue
        folder = str(Path(file.path).parent)
        if folder not in folders:
            folders[folder] = []
            slots.append(folders[folder])
        folders[folder].append(file)
    groups: list[tuple[list[InputFile], bool]] = []
    for slot in slots:
        if isinstance(slot, InputFile):
            groups.append(([slot], False))
            continue
        groups += [([f], False) for f in slot if f.static]
        events = [f for f in slot if not f.static]
        if events:
            groups.append((events, True))
    assigned: list[InputFile] = []
    units: list[Unit] = []
    for index, (members, interleave) in enumerate(groups):
        placed = tuple(replace(f, unit=index) for f in members)
        assigned += placed
        units.append(Unit(index, placed, interleave))
    return sorted(assigned, key=lambda f: f.index), units
