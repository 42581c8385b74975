"""The Cumulus home: `cumulus init` fixes its schema and creates its tables.

    <home>/schema.sql      the DDL the home was initialized with (every command reads it)
    <home>/cumulus.toml    settings, [sources.NAME] and [ingest] (optional)
    <home>/catalog.db      the Iceberg JDBC catalog (embedded mode)
    <home>/catalog.lock    the catalog writers' lock
    <home>/warehouse/      the tables' files
    <home>/landing/NAME/   a source's landing folder, unless configured elsewhere
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cumulus.config import HOME_MARKER, Settings
from cumulus.errors import StoreError
from cumulus.schema import Schema, load_schema, parse_schema
from cumulus.store.catalog import write_pyiceberg_config
from cumulus.store.ledger import open_first_epoch
from cumulus.store.lock import catalog_lock
from cumulus.store.tables import Home, attach_catalog, check_relation_names, create_statements

SCHEMA_FILE = HOME_MARKER
log = logging.getLogger("cumulus.init")


def schema_path(settings: Settings) -> Path:
    return settings.home / SCHEMA_FILE


def load_home_schema(settings: Settings) -> Schema:
    """The relations of an initialized home."""
    path = schema_path(settings)
    if not path.is_file():
        raise StoreError(
            f"{settings.home} is not an initialized Cumulus home (no {SCHEMA_FILE}); run "
            f"`cumulus --home {settings.home} init --schema SCHEMA.sql` first"
        )
    stat = path.stat()
    version = (stat.st_mtime_ns, stat.st_size)
    kept = _SCHEMAS.get(path)
    if kept is None or kept[0] != version:  # parsed once per version of the file (a warm engine ingests often)
        kept = _SCHEMAS[path] = (version, load_schema(path))
    return kept[1]


_SCHEMAS: dict[Path, tuple[tuple[int, int], Schema]] = {}  # schema.sql -> (its mtime and size, parsed)


@dataclass(frozen=True)
class InitResult:
    schema: Schema
    created: bool  # False: the home already had this schema (nothing changed)
    epoch: int


def init_home(home: Home, schema_file: str | Path) -> InitResult:
    """Fix the home's schema and create its namespaces, tables and epoch 1. Running it
    again with the same schema only re-checks (and completes) what exists; another schema
    is refused."""
    schema_file = Path(schema_file)
    text = schema_file.read_text() if schema_file.is_file() else None
    if text is None:
        raise StoreError(f"schema file {schema_file} not found")
    schema = parse_schema(text, source=str(schema_file))
    check_relation_names(schema)
    path = schema_path(home.settings)
    created = True
    if path.is_file():
        existing = load_schema(path)
        if existing != schema:
            raise StoreError(
                f"{home.settings.home} was initialized with another schema ({path}): "
                f"{_difference(existing, schema)}. A home keeps its schema; use a new home "
                "for a new schema"
            )
        created = False
    else:
        home.settings.home.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".sql.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # the schema is fixed first: a crashed init is re-run as is

    attach_catalog(home)
    with catalog_lock(home.settings, "init"):
        for stmt in create_statements(home.settings, schema):
            home.spark.sql(stmt)
        first = open_first_epoch(home)
    (home.settings.home / "landing").mkdir(exist_ok=True)
    write_pyiceberg_config(home.settings)  # any PyIceberg reader: load_catalog(settings.catalog)
    log.info(
        "%s home %s: relations %s; epoch %d is open",
        "initialized" if created else "checked",
        home.settings.home,
        ", ".join(schema.names),
        first.epoch,
    )
    return InitResult(schema, created, first.epoch)


def _difference(old: Schema, new: Schema) -> str:
    old_names, new_names = set(old.names), set(new.names)
    parts = []
    if new_names - old_names:
        parts.append("new relations " + ", ".join(sorted(new_names - old_names)))
    if old_names - new_names:
        parts.append("missing relations " + ", ".join(sorted(old_names - new_names)))
    changed = [r.name for r in new.relations if r.name in old_names and r != old.relation(r.name)]
    if changed:
        parts.append("relation(s) " + ", ".join(changed) + " differ")
    return "; ".join(parts) or "the relations are declared in another order"
