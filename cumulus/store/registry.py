"""The view registry of a home: the table `cumulus.views`, one row per view added (its SQL
or M3 program, kind, position, the epoch it was added at) and a `dropped` row for each
view dropped since. Read with a Spark session or a PyIceberg catalog (store/rows.py);
what is compiled from it is the engine's (cumulus/engine/registry.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import astuple, dataclass

from cumulus.config import Settings
from cumulus.errors import NotFoundError
from cumulus.spark.local import local_frame
from cumulus.store.rows import Reader, read_rows
from cumulus.store.tables import Home, ddl_type, ensure_table, tables_of

VIEWS_COLUMNS = (
    ("name", "STRING"),
    ("sql", "STRING"),  # the view's SELECT, or a hand-written M3 program
    ("kind", "STRING"),  # sql | m3
    ("position", "INT"),
    ("added_epoch", "BIGINT"),
    ("added_at", "TIMESTAMP"),
    ("columns", "STRING"),  # a view kept by full refresh: its columns, order and reason (sql.full.FullView, JSON)
)


SQL, M3, FULL = "sql", "m3", "full"  # FULL: SQL kept by full refresh (cumulus/sql/full.py)
DROPPED = "dropped"  # the kind of the row `view drop` appends: the view of that name is gone


@dataclass(frozen=True)
class RegisteredView:
    name: str
    sql: str
    kind: str
    position: int
    added_epoch: int
    added_at: dt.datetime | None
    columns: str | None = None  # FULL: sql.full.FullView's JSON (cumulus.engine.registry.full_view)


def ensure_views_table(home: Home) -> None:
    ensure_table(home.spark, home.tables.registry, VIEWS_COLUMNS)


def registry(reader: Reader, settings: Settings) -> list[RegisteredView]:
    """Every row of the registry in registration order ([] before the first `view add`):
    the views ever added, and a `dropped` row for each view dropped since."""
    try:
        rows = read_rows(reader, tables_of(settings).registry)
    except Exception as exc:  # the table does not exist yet
        if "not found" in str(exc).lower() or "NoSuchTable" in type(exc).__name__ or "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            return []
        raise
    # A home made before programs could be registered has no `kind`: its views are SQL.
    return [RegisteredView(**{**r, "kind": r.get("kind") or SQL}) for r in sorted(rows, key=lambda r: r["position"])]


def live(rows: list[RegisteredView]) -> list[RegisteredView]:
    """The registry's views that were not dropped."""
    gone = dropped(rows)
    return [v for v in rows if v.kind != DROPPED and v.name not in gone]


def dropped(rows: list[RegisteredView]) -> set[str]:
    return {v.name for v in rows if v.kind == DROPPED}


def is_registered(rows: list[RegisteredView], name: str) -> bool:
    """True for a registered view, False for one dropped before (a retry of `view drop`);
    NotFoundError for a name the registry never had."""
    if any(v.name == name for v in live(rows)):
        return True
    if name in dropped(rows):
        return False
    views = ", ".join(v.name for v in live(rows)) or "none"
    raise NotFoundError(f"no view named {name} is registered (views: {views})")


def append_row(home: Home, view: RegisteredView) -> None:
    """Append a row to the registry (a view added, or the `dropped` row of one)."""
    local_frame(home.spark, [astuple(view)], ddl_type(VIEWS_COLUMNS)).writeTo(home.tables.registry).append()


def registered_views(reader: Reader, settings: Settings) -> list[RegisteredView]:
    """The views registered and not dropped, in registration order."""
    return live(registry(reader, settings))
