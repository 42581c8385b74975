"""The quarantine `cumulus.quarantine`: every input row ingestion rejected, with the
source, file, line, the raw text and the reason, so a person can see what went wrong,
fix the file and offer it again. Ids are numbers, increasing in commit order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cumulus.config import Settings
from cumulus.store.rows import Reader, read_rows, scan_arrow
from cumulus.store.tables import tables_of

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

LIST_COLUMNS = ("id", "epoch", "source", "file", "line", "relation", "reason", "detail")


def next_id(catalog: Catalog, settings: Settings) -> int:
    """The first free quarantine id (call under the catalog lock): the `id` column alone,
    read through PyIceberg (each data file once per process: scan_arrow)."""
    import pyarrow.compute as pc

    table = catalog.load_table(tables_of(settings).quarantine.pyiceberg)
    top = pc.max(scan_arrow(table.scan(selected_fields=("id",))).column("id")).as_py()
    return 1 if top is None else int(top) + 1


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
