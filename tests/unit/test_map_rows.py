"""How far a map table is from compact, read from its Iceberg metadata alone
(cumulus.store.maps.map_rows_in): the delta rows of closed epochs appended since the
last compaction, across applies, a compaction, maintenance's unmarked file rewrites and
the open epoch's rows."""

from __future__ import annotations

from cumulus.store.commit import EPOCH
from cumulus.store.maps import COMPACTED_THROUGH, MapRows, map_rows_in


def _meta(*snaps: tuple[int, int | None, dict]) -> dict:
    return {
        "current-snapshot-id": snaps[-1][0] if snaps else None,
        "snapshots": [{"snapshot-id": i, "parent-snapshot-id": p, "summary": s} for i, p, s in snaps],
    }


def _append(epoch: int, rows: int) -> dict:
    return {"operation": "append", EPOCH: str(epoch), "added-records": str(rows)}


def test_a_new_map_counts_every_delta_row_of_closed_epochs():
    assert map_rows_in(_meta(), 1) == MapRows(0, 0)
    meta = _meta((1, None, {"operation": "append", "added-records": "0"}),  # the empty first snapshot
                 (2, 1, _append(1, 5)), (3, 2, _append(1, 4)), (4, 3, _append(2, 6)))
    assert map_rows_in(meta, 1) == MapRows(9, 0)  # epoch 2's rows are not closed yet
    assert map_rows_in(meta, 2) == MapRows(15, 0)


def test_rows_count_from_the_last_compaction_and_file_rewrites_add_none():
    meta = _meta(
        (1, None, _append(1, 40)),
        (2, 1, {"operation": "overwrite", COMPACTED_THROUGH: "1", "total-records": "25", "added-records": "25"}),
        (3, 2, _append(2, 7)),
        (4, 3, {"operation": "replace", "added-records": "32", "total-records": "32"}),  # maintenance rewrite
        (5, 4, _append(3, 2)),
    )
    assert map_rows_in(meta, 2) == MapRows(7, 25)
    assert map_rows_in(meta, 3) == MapRows(9, 25)
