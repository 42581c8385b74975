"""Each landing format through the Spark job: the same logical changes written as JSON
Lines, CSV, Parquet and a DBToaster stream land as the same typed events, with versions
(epoch, source priority, seq) in file and row (or event-order) order."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ingestkit import SHOP, events, write, write_home

from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.store.tables import Home


def changes(k: int):
    """Orders k+1..k+3 inserted, k+2 deleted; an item of k+1 (two relations)."""
    rows = [
        ("+", (k + 1, 7, Decimal("10.50"), dt.date(2024, 3, 1), "first")),
        ("+", (k + 2, None, Decimal("0.05"), None, "")),
        ("+", (k + 3, 9, Decimal("-3.00"), dt.date(2024, 3, 3), "third, with comma")),
        ("-", (k + 2, None, Decimal("0.05"), None, "")),
    ]
    item = (k + 1, 4, 2.5, True)
    return rows, item


ORDER_COLS = ("o_id", "o_cust", "o_total", "o_date", "o_note")
ITEM_COLS = ("i_order", "i_qty", "i_price", "i_gift")


def jsonl(root, k):
    rows, item = changes(k)
    lines = []
    for op, row in rows:
        values = [str(v) if isinstance(v, Decimal | dt.date) else v for v in row]
        lines.append(json.dumps({"relation": "orders", "op": op, "row": dict(zip(ORDER_COLS, values, strict=True))}))
    lines.insert(1, json.dumps({"relation": "items", "row": dict(zip(ITEM_COLS, item, strict=True))}))
    return [write(root / "changes.jsonl", "\n".join(lines) + "\n")]


def text(v):
    if v is None:
        return "\\N"
    return "true" if v is True else str(v)


def csv(root, k):
    rows, item = changes(k)
    body = "".join(
        f"{'1' if op == '+' else '0'}," + ",".join(f'"{text(v)}"' if isinstance(v, str) and "," in v else text(v) for v in row) + "\n"
        for op, row in rows
    )
    orders = write(root / "orders.csv", "op," + ",".join(ORDER_COLS) + "\n" + body)
    items = write(root / "items.csv", ",".join(ITEM_COLS) + "\n" + ",".join(map(text, item)) + "\n")
    return [orders, items]


def parquet(root, k):
    rows, item = changes(k)
    root.mkdir(parents=True, exist_ok=True)
    columns = list(zip(*[row for _, row in rows], strict=True))
    table = pa.table(
        {
            "o_id": pa.array(columns[0], pa.int64()),
            "o_cust": pa.array(columns[1], pa.int32()),
            "o_total": pa.array(columns[2], pa.decimal128(12, 2)),
            "o_date": pa.array(columns[3], pa.date32()),
            "o_note": pa.array(columns[4], pa.string()),
            "op": pa.array([op for op, _ in rows]),
        }
    )
    pq.write_table(table, root / "orders.parquet")
    pq.write_table(pa.table({c: [v] for c, v in zip(ITEM_COLS, item, strict=True)}), root / "items.parquet")
    return [root / "orders.parquet", root / "items.parquet"]


def dbtoaster(root, k):
    """One folder; the item shares event number 1 with the first order (one transaction)."""
    rows, item = changes(k)
    orders = "".join(f"{n}|{'1' if op == '+' else '0'}|" + "|".join(map(text, row)) + "\n" for n, (op, row) in enumerate(rows, 1))
    write(root / "orders.csv", orders)
    write(root / "items.csv", "1|1|" + "|".join(map(text, item)) + "\n")
    return [root]


FORMATS = {"jsonl": (jsonl, 0), "csv": (csv, 10), "parquet": (parquet, 20), "dbtoaster": (dbtoaster, 30)}


@pytest.fixture(scope="module")
def home(tmp_path_factory, spark):
    from cumulus.store.home import init_home

    settings = write_home(tmp_path_factory.mktemp("fhome"), "ingf")
    init_home(Home(spark, settings), SHOP)
    add_source(settings, "a", 5)
    return settings


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_format(spark, home, tmp_path, fmt):
    make, k = FORMATS[fmt]
    paths = make(tmp_path / fmt, k)
    report = ingest_files(Home(spark, home), "a", paths, fmt=fmt)
    assert (report.accepted, report.rejected) == (5, 0) and report.committed

    rows, item = changes(k)
    got = [r for r in events(spark, home, "orders") if k < r["o_id"] <= k + 3]
    assert [(r["op"], tuple(r[c] for c in ORDER_COLS)) for r in got] == [
        (1 if op == "+" else -1, row) for op, row in rows
    ]
    items = [r for r in events(spark, home, "items") if r["i_order"] == k + 1]
    assert [tuple(r[c] for c in ITEM_COLS) for r in items] == [item]
    for r in got + items:
        assert (r["epoch"], r["source_id"], r["batch_id"]) == (1, 5, report.batch_id)
    seqs = [r["seq"] for r in got]
    assert seqs == sorted(seqs) and len(set(seqs + [items[0]["seq"]])) == 5
    if fmt == "jsonl":  # one file: the item is the file's second line
        assert got[0]["seq"] < items[0]["seq"] < got[1]["seq"]
    if fmt == "dbtoaster":  # event 1: the order (first relation), then the item
        assert got[0]["seq"] < items[0]["seq"] < got[1]["seq"]
    # Every batch of the source in the epoch follows the previous ones.
    earlier = [r["seq"] for r in events(spark, home, "orders") if r["o_id"] <= k]
    assert all(s < min(seqs) for s in earlier)
