"""The registered views of a home (`cumulus.views`) and the program compiled from them.
Views are compiled together, in registration order, so map names are stable: adding a
view keeps every existing map and its table, and adds tables for the new maps only."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.evaluate import BatchPlan, plan_from_compilation
from cumulus.errors import CumulusError
from cumulus.schema import Schema
from cumulus.sql.views import Compilation, compile_views
from cumulus.store.rows import Reader, read_rows
from cumulus.store.tables import META, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VIEWS_COLUMNS = (
    ("name", "STRING"),
    ("sql", "STRING"),
    ("position", "INT"),
    ("added_epoch", "BIGINT"),
    ("added_at", "TIMESTAMP"),
)


class ViewError(CumulusError):
    """A view cannot be registered (name taken, SQL refused) or is unknown."""


@dataclass(frozen=True)
class RegisteredView:
    name: str
    sql: str
    position: int
    added_epoch: int
    added_at: dt.datetime | None


def views_table(settings: Settings) -> str:
    return qualified(settings, META, "views")


def ensure_views_table(spark: SparkSession, settings: Settings) -> None:
    cols = ", ".join(f"{c} {t}" for c, t in VIEWS_COLUMNS)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {views_table(settings)} ({cols}) USING iceberg")


def registered_views(reader: Reader, settings: Settings) -> list[RegisteredView]:
    """The views in registration order ([] before the first `view add`)."""
    try:
        rows = read_rows(reader, views_table(settings))
    except Exception as exc:  # the table does not exist yet
        if "not found" in str(exc).lower() or "NoSuchTable" in type(exc).__name__ or "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            return []
        raise
    return [RegisteredView(**r) for r in sorted(rows, key=lambda r: r["position"])]


def compile_registered(schema: Schema, views: list[RegisteredView]) -> Compilation:
    return compile_views(schema, [(v.name, v.sql) for v in views])


def batch_plan(compilation: Compilation) -> BatchPlan:
    return plan_from_compilation(compilation.checked, compilation.batch)
