"""The quarantine `cumulus.quarantine`: every input row ingestion rejected, with the
source, file, line, the raw text and the reason, so a person can see what went wrong,
fix the file and offer it again. Ids are numbers, increasing in commit order."""

from __future__ import annotations

from typing import Any

from cumulus.config import Settings
from cumulus.store.rows import Reader, read_rows
from cumulus.store.tables import Home, tables_of

LIST_COLUMNS = ("id", "epoch", "source", "file", "line", "relation", "reason", "detail")


def next_id(home: Home) -> int:
    """The first free quarantine id (call under the catalog lock)."""
    from pyspark.sql import functions as F

    row = home.spark.table(home.tables.quarantine).agg(F.max("id").alias("m")).first()
    return 1 if row is None or row.m is None else int(row.m) + 1


def list_rows(
    reader: Reader,
    settings: Settings,
    epoch: int | None = None,
    source: str | None = None,
    reason: str | None = None,
    batch_id: str | None = None,
) -> list[dict[str, Any]]:
    """Quarantine rows, filtered, ordered by id."""
    where: dict[str, Any] = {}
    for name, value in (("epoch", epoch), ("source", source), ("reason", reason), ("batch_id", batch_id)):
        if value is not None:
            where[name] = value
    rows = read_rows(reader, tables_of(settings).quarantine, where)
    return sorted(rows, key=lambda r: r["id"])


def get_row(reader: Reader, settings: Settings, qid: int) -> dict[str, Any] | None:
    rows = read_rows(reader, tables_of(settings).quarantine, {"id": qid})
    return rows[0] if rows else None
