"""What the language commands read (`compile`, `m3`, `interpret`, `view add`, `dbt
generate`): a file or standard input, a view named after its file, views compiled in a
dialect, and M3 programs validated against a schema."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cumulus.config import DEFAULT_DIALECT, SQL_DIALECTS
from cumulus.errors import CumulusError
from cumulus.m3.parser import parse_program
from cumulus.m3.validate import CheckedProgram, validate
from cumulus.schema import load_schema
from cumulus.sql.views import Compilation, compile_views


def read_text(path: str) -> str:
    """A file's text, or standard input's for `-`."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CumulusError(f"cannot read {path}: {exc.strerror}") from None


def load_program(path: str, schema_path: str) -> CheckedProgram:
    text = read_text(path)
    return validate(parse_program(text, source=path), load_schema(schema_path), text)


def view_name(path: str) -> str:
    """A view's default name: its file's stem (`revenue.sql` -> `revenue`)."""
    return Path(path).stem.lower().replace("-", "_") if path != "-" else "view"


def read_views(paths: list[str]) -> list[tuple[str, str]]:
    """(name, SQL) of each view file, named after the file."""
    return [(view_name(p), read_text(p)) for p in paths]


def compile_files(paths: list[str], schema_path: str, dialect: str = DEFAULT_DIALECT) -> Compilation:
    return compile_views(load_schema(schema_path), read_views(paths), dialect)


def add_dialect_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dialect", choices=SQL_DIALECTS, default=DEFAULT_DIALECT,
                        help=f"the SQL dialect of the views (default: {DEFAULT_DIALECT}; a home's: sql_dialect)")
