"""The warm engine's hot state (cumulus/engine/apply.py, HotState): maps.entries at each
snapshot an apply reads, carried forward in memory by the appends after it, equals the
table read at that snapshot: after applies (appends: an incremental read, its pieces made
one past HOT_PIECES), after a compaction (an overwrite: read in full again) and at an
older snapshot (not a descendant: read in full). The applies that read it leave the view
equal to DuckDB over the rows alive."""

from __future__ import annotations

import pytest
from enginekit import CHAIN, SOURCES, write_events
from oracle import DuckOracle

from cumulus.engine import apply
from cumulus.engine.apply import HotState, apply_source, current_snapshot_id, map_state
from cumulus.engine.close import close_epoch
from cumulus.ingest.job import ingest_files
from cumulus.output import sort_key
from cumulus.read import At, Reader
from cumulus.store.maps import compact_maps, maps_table

pytestmark = pytest.mark.e2e


def alive(events) -> dict[str, list]:
    out: dict[str, list] = {}
    for e in events:
        bag = out.setdefault(e.relation, [])
        bag.append(e.values) if e.sign == "+" else bag.remove(e.values)
    return out


def test_the_hot_state_is_the_table_at_every_snapshot(spark, simple_home, tmp_path, monkeypatch) -> None:
    settings, plan, compiled, events = simple_home
    monkeypatch.setattr(apply, "HOT_PIECES", 2)
    hot = HotState()

    def held_pieces_at(snapshot: int) -> int:
        """The hot state at `snapshot` equals the table read there; its pieces."""
        want = map_state(spark, settings, snapshot)
        got = hot.at(spark, settings, snapshot).select(*want.columns)
        assert sorted(map(tuple, got.collect()), key=repr) == sorted(map(tuple, want.collect()), key=repr)
        return len(hot._held.pieces)

    pieces, snaps = [], []
    for i, part in enumerate((events[:80], events[80:])):
        for name, (relations, _) in SOURCES.items():
            ingest_files(spark, settings, name, [write_events(part, tmp_path / f"p{i}" / name, relations)],
                         fmt="dbtoaster")
        for source_id in (1, 2):
            assert apply_source(spark, settings, plan, 1, source_id, hot=hot) is not None
            snaps.append(current_snapshot_id(spark, maps_table(settings)))
            pieces.append(held_pieces_at(snaps[-1]))
    # An append after the held snapshot is read alone and added as a piece; past
    # HOT_PIECES (2 here) the pieces become one.
    assert 2 in pieces and pieces.count(1) >= 2, pieces

    oracle = DuckOracle(compiled.schema, alive(events))
    fresh = Reader(settings).read_view("chain", At())
    assert sorted(fresh, key=sort_key) == sorted(oracle.query(CHAIN), key=sort_key)

    close_epoch(spark, settings, plan, 1)
    compact_maps(spark, settings, 1)  # an overwrite: the rows change
    assert held_pieces_at(current_snapshot_id(spark, maps_table(settings))) == 1
    assert held_pieces_at(snaps[0]) == 1  # older, not a descendant: read in full
