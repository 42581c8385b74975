"""The TPC-H event stream generator (tpchgen-cli, no JVM): layout, determinism, the
changed fraction, fresh keys, deletes of live orders with all their line items, and
files the ingestion's own reader accepts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cumulus.ingest.tpch_stream import READY, Manifest, alive, generate, read_events
from cumulus.schema import load_schema

REPO = Path(__file__).resolve().parents[2]
SCALE, EPOCHS, FRACTION = 0.001, 4, 0.01


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    return generate(SCALE, EPOCHS, FRACTION, tmp_path_factory.mktemp("tpch") / "s", seed=3)


def test_layout_and_manifest(stream):
    assert stream.sources == {"sales": 1, "catalog": 2}
    for epoch in range(1, EPOCHS + 1):
        for source in stream.sources:
            assert (stream.folder(source, epoch) / READY).is_file()
    assert Manifest.load(stream.root) == stream
    first = stream.batch("sales", 1)
    assert first.inserts["orders"] == 1500 and not first.deletes


def test_same_seed_same_bytes(stream, tmp_path):
    again = generate(SCALE, EPOCHS, FRACTION, tmp_path / "again", seed=3)
    for b in stream.batches:
        for path in sorted((stream.root / b.folder).iterdir()):
            assert path.read_bytes() == (again.root / b.folder / path.name).read_bytes(), path
    other = generate(SCALE, 2, FRACTION, tmp_path / "other", seed=4)
    assert (other.folder("sales", 2) / "orders.tbl").read_text() != (stream.folder("sales", 2) / "orders.tbl").read_text()


def test_each_later_epoch_changes_about_the_fraction(stream):
    lineitems = stream.batch("sales", 1).inserts["lineitem"]
    for epoch in range(2, EPOCHS + 1):
        b = stream.batch("sales", epoch)
        changed = b.inserts["lineitem"] + b.deletes["lineitem"]
        assert 0.4 * FRACTION * lineitems <= changed <= 2.5 * FRACTION * lineitems, (epoch, changed)
        assert b.inserts["orders"] == b.deletes["orders"] >= 1
        assert stream.batch("catalog", epoch).inserts == {"customer": 2}


def test_orders_and_items_stay_consistent(stream):
    """New keys are fresh; every delete removes a live order with all its line items;
    every live line item belongs to a live order of a live customer."""
    seen_orders = Counter()
    for epoch in range(1, EPOCHS + 1):
        live = alive(stream, epoch)
        orders = {r[0] for r in live["orders"]}
        assert len(orders) == len(live["orders"])  # no key twice
        assert {r[0] for r in live["lineitem"]} <= orders
        assert {r[1] for r in live["orders"]} <= {r[0] for r in live["customer"]}
        for sign, row in read_events(stream.folder("sales", epoch), "orders"):
            if sign > 0:
                seen_orders[row[0]] += 1
    assert max(seen_orders.values()) == 1  # an order key is inserted once, ever
    # Deleting an order deletes every one of its line items.
    last = alive(stream, EPOCHS)
    first = alive(stream, 1)
    gone = {r[0] for r in first["orders"]} - {r[0] for r in last["orders"]}
    assert gone and not ({r[0] for r in last["lineitem"]} & gone)


def test_a_source_behind(stream):
    """alive() with one epoch per source: the customers of a late catalog are missing."""
    both = alive(stream, 3)
    behind = alive(stream, {"sales": 3, "catalog": 2})
    assert both["orders"] == behind["orders"]
    assert len(both["customer"]) == len(behind["customer"]) + 2


def test_files_parse_with_the_ingest_reader(stream):
    """The ingestion's DBToaster reader (cumulus/ingest/formats.py) accepts every row,
    with the operations the stream meant."""
    from cumulus.ingest.formats import codecs, read_file

    schema = load_schema(REPO / "demo" / "tpch_schema.sql")
    codec_map = codecs(schema)
    for epoch in (1, 2):
        for source in stream.sources:
            for path in sorted(stream.folder(source, epoch).glob("*.tbl")):
                records = list(read_file(path, "dbtoaster", schema, path.stem, codec_map))
                assert records and not [r for r in records if r.reason], path
                ops = Counter(r.op for r in records)
                assert ops == Counter(sign for sign, _ in read_events(path.parent, path.stem)), path
