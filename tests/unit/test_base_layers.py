"""The layered state of a base table, read from its Iceberg metadata alone
(cumulus.store.fold.layers_in): which snapshot decides, across folds, compactions and
maintenance's unmarked file rewrites."""

from __future__ import annotations

from cumulus.store.fold import LAYER_ROWS, LAYERS_BEFORE, Layers, layers_in


def _meta(*snaps: tuple[int, int | None, dict], current: int | None = None) -> dict:
    """Metadata with snapshots (id, parent, summary), current = the last one by default."""
    return {
        "current-snapshot-id": current if current is not None else (snaps[-1][0] if snaps else None),
        "snapshots": [{"snapshot-id": i, "parent-snapshot-id": p, "summary": s} for i, p, s in snaps],
    }


def test_an_unmarked_or_empty_table_is_compact():
    assert layers_in(_meta()) == Layers(0, 0)
    assert layers_in(_meta((1, None, {"operation": "append", "total-records": "5"}))) == Layers(0, 0)


def test_layers_count_from_the_last_compaction_and_a_tag_reads_its_own_ancestry():
    meta = _meta(
        (1, None, {LAYER_ROWS: "0", "total-records": "100"}),  # first fold into an empty table
        (2, 1, {LAYER_ROWS: "7", "total-records": "107"}),  # a fold appends a layer
        (3, 2, {LAYER_ROWS: "12", "total-records": "112"}),
        (4, 3, {"operation": "replace", "total-records": "112"}),  # maintenance's file rewrite: no mark
    )
    assert layers_in(meta) == Layers(12, 100)  # the nearest marked ancestor of the unmarked rewrite
    assert layers_in(meta, 2) == Layers(7, 100)  # as of an older snapshot (a tag)
    assert layers_in(meta, 1) == Layers(0, 100)
    compacted = _meta(*[(s["snapshot-id"], s["parent-snapshot-id"], s["summary"]) for s in meta["snapshots"]],
                      (5, 4, {LAYER_ROWS: "0", "total-records": "104"}),
                      (6, 5, {LAYER_ROWS: "3", "total-records": "107"}))
    assert layers_in(compacted) == Layers(3, 104)
    assert layers_in(compacted, 5) == Layers(0, 104)
    assert layers_in(compacted, 3) == Layers(12, 100)  # the old tag still sees its layers


def test_a_fold_adds_its_own_rows_to_the_layers_before_it():
    meta = _meta(
        (1, None, {LAYER_ROWS: "0", "total-records": "100"}),  # the initial load, compact
        (2, 1, {LAYERS_BEFORE: "0", "added-records": "7", "total-records": "107"}),
        (3, 2, {LAYERS_BEFORE: "7", "added-records": "5", "total-records": "112"}),
        (4, 3, {"operation": "replace", "total-records": "112"}),
        (5, 4, {LAYER_ROWS: "0", "total-records": "104"}),  # a compaction
        (6, 5, {LAYERS_BEFORE: "0", "added-records": "2", "total-records": "106"}),
        (7, 6, {LAYERS_BEFORE: "2", "total-records": "106"}),  # a fold of no net change
    )
    assert layers_in(meta, 3) == Layers(12, 100)
    assert layers_in(meta, 4) == Layers(12, 100)
    assert layers_in(meta, 5) == Layers(0, 104)
    assert layers_in(meta) == Layers(2, 104)
    first_with_deletes = _meta((1, None, {LAYER_ROWS: "9", "total-records": "9"}),
                               (2, 1, {LAYERS_BEFORE: "9", "added-records": "1", "total-records": "10"}))
    assert layers_in(first_with_deletes) == Layers(10, 0)


def test_a_snapshot_outside_the_metadata_reads_as_compact():
    assert layers_in(_meta((1, None, {LAYER_ROWS: "4"})), 99) == Layers(0, 0)
