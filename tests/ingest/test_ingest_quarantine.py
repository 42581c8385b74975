"""Validation with quarantine, through the Spark job: every kind of bad input becomes a
quarantine row with the right reason, file and line, and no good row is lost; deletes
are checked against base.* + committed events + earlier rows, counting multiplicities;
a source past its error threshold fails loudly and applies nothing."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from ingestkit import events, write

from cumulus.cli import main
from cumulus.errors import ExitCode, IngestError
from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.store import ledger
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.files import REJECTED
from cumulus.store.fold import fold_epoch
from cumulus.store.quarantine import list_rows
from cumulus.store.rows import read_rows
from cumulus.store.tables import Home, tables_of

ORDER = '{{"relation": "orders", "op": "{op}", "row": {{"o_id": {id}, "o_cust": 7, "o_total": 1.5, "o_date": "2024-01-0{id}", "o_note": "n{id}"}}}}'
ITEM = '{{"relation": "items", "op": "{op}", "row": {{"i_order": {id}, "i_qty": 1, "i_price": 0.5, "i_gift": false}}}}'


def order(id, op="+"):
    return ORDER.format(id=id, op=op)


def item(id, op="+"):
    return ITEM.format(id=id, op=op)


@pytest.fixture(scope="module")
def home(tmp_path_factory, spark):
    """One home for the module (the tests build on each other's epochs), with sources
    a (max_error_rate 0.9), b (1.0: never refused) and strict (0.2)."""
    from ingestkit import SHOP, write_home

    from cumulus.store.home import init_home

    settings = write_home(tmp_path_factory.mktemp("qhome"), "ingq")
    init_home(Home(spark, settings), SHOP)
    add_source(settings, "a", 1, max_error_rate=0.9)
    add_source(settings, "b", 2, max_error_rate=1.0)
    add_source(settings, "strict", 3, max_error_rate=0.2)
    return settings


def test_every_bad_row_is_quarantined_and_every_good_row_kept(spark, home, tmp_path):
    mixed = write(
        tmp_path / "mixed.jsonl",
        "\n".join(
            [
                order(1),  # 1 good
                item(1),  # 2 good
                '{"relation": "nope", "row": {"x": 1}}',  # 3 unknown_relation
                '{"relation": "orders", "row": {"o_id": 9}}',  # 4 missing_field
                '{"relation": "orders", "row": {"o_id": null, "o_cust": 1, "o_total": 1, "o_date": null, "o_note": null}}',  # 5 not_null
                '{"relation": "orders", "row": {"o_id": 9, "o_cust": 1, "o_total": "1.234", "o_date": null, "o_note": null}}',  # 6 bad_value
                "{broken",  # 7 malformed
                '{"relation": "items", "row": {"i_order": 9, "i_qty": 1, "i_price": 1, "i_gift": true, "x": 1}}',  # 8 unknown_field
                item(2, op="~"),  # 9 bad_op
                order(2),  # 10 good
                item(1),  # 11 good: a second copy of item 1
            ]
        )
        + "\n",
    )
    csv_file = write(
        tmp_path / "orders.csv",
        "o_id,o_cust,o_total,o_date,o_note\n"
        "3,7,1.5,2024-01-03,n3\n"  # 2 good
        "4,7,1.5\n"  # 3 column_count
        "5,7,1.5,2024-13-01,n5\n"  # 4 bad_value
        "6,7,1.5,2024-01-06,n6\n",  # 5 good
    )
    deletes = write(
        tmp_path / "items.jsonl",
        '{"op": "-", "i_order": 1, "i_qty": 1, "i_price": 0.5, "i_gift": false}\n'  # 1 good (2 copies)
        '{"op": "-", "i_order": 1, "i_qty": 1, "i_price": 0.5, "i_gift": false}\n'  # 2 good (1 copy left)
        '{"op": "-", "i_order": 1, "i_qty": 1, "i_price": 0.5, "i_gift": false}\n'  # 3 not_alive
        '{"op": "-", "i_order": 8, "i_qty": 1, "i_price": 0.5, "i_gift": false}\n'  # 4 not_alive
        '{"op": "+", "i_order": 8, "i_qty": 1, "i_price": 0.5, "i_gift": false}\n',  # 5 good
    )
    report = ingest_files(Home(spark, home), "a", [mixed, csv_file, deletes])
    assert report.committed and report.epoch == 1
    assert (report.accepted, report.rejected) == (9, 11)
    assert dict(report.relations["orders"].rejected) == {
        "missing_field": 1, "not_null": 1, "bad_value": 2, "column_count": 1,
    }
    assert dict(report.relations["items"].rejected) == {"unknown_field": 1, "bad_op": 1, "not_alive": 2}

    q = list_rows(spark, home, epoch=1, source="a")
    got = sorted((r["file"].rsplit("/", 1)[1], r["line"], r["reason"]) for r in q)
    assert got == sorted(
        [
            ("mixed.jsonl", 3, "unknown_relation"),
            ("mixed.jsonl", 4, "missing_field"),
            ("mixed.jsonl", 5, "not_null"),
            ("mixed.jsonl", 6, "bad_value"),
            ("mixed.jsonl", 7, "malformed"),
            ("mixed.jsonl", 8, "unknown_field"),
            ("mixed.jsonl", 9, "bad_op"),
            ("orders.csv", 3, "column_count"),
            ("orders.csv", 4, "bad_value"),
            ("items.jsonl", 3, "not_alive"),
            ("items.jsonl", 4, "not_alive"),
        ]
    )
    assert [r["id"] for r in q] == list(range(q[0]["id"], q[0]["id"] + len(q)))
    by_line = {(r["file"].rsplit("/", 1)[1], r["line"]): r for r in q}
    assert by_line[("mixed.jsonl", 7)]["raw"] == "{broken"
    assert by_line[("orders.csv", 3)]["raw"] == "4,7,1.5"
    assert by_line[("items.jsonl", 4)]["relation"] == "items" and by_line[("items.jsonl", 4)]["op"] == -1
    assert "1.234" in by_line[("mixed.jsonl", 6)]["detail"]
    assert {r["batch_id"] for r in q} == {report.batch_id}

    orders = events(spark, home, "orders")
    assert [(r["o_id"], r["op"]) for r in orders] == [(1, 1), (2, 1), (3, 1), (6, 1)]
    assert orders[0]["o_total"] == Decimal("1.50") and orders[0]["o_date"] == dt.date(2024, 1, 1)
    items = events(spark, home, "items")
    assert [(r["i_order"], r["op"]) for r in items] == [(1, 1), (1, 1), (1, -1), (1, -1), (8, 1)]
    seqs = [r["seq"] for r in items + orders]
    assert len(set(seqs)) == len(seqs)  # one version per event

    manifest = {r["path"].rsplit("/", 1)[1]: r for r in read_rows(spark, tables_of(home).files, {"batch_id": report.batch_id})}
    assert {k: (v["rows_accepted"], v["rows_rejected"], v["status"]) for k, v in manifest.items()} == {
        "mixed.jsonl": (4, 7, "ingested"),
        "orders.csv": (2, 2, "ingested"),
        "items.jsonl": (3, 2, "ingested"),
    }


def test_deletes_count_multiplicities_across_batches_sources_and_epochs(spark, home, tmp_path):
    # Epoch 1 (after the test above): orders 1, 2, 3, 6 are alive once each.
    first = ingest_files(Home(spark, home), "a", [write(tmp_path / "1.jsonl", order(7) + "\n" + order(7) + "\n")])
    assert first.accepted == 2
    # Another source may delete what source a committed: alive in commit order.
    second = ingest_files(Home(spark, home), "b", [write(tmp_path / "2.jsonl", order(1, "-") + "\n" + order(7, "-") + "\n")])
    assert (second.accepted, second.rejected) == (2, 0)
    third = ingest_files(Home(spark, home), "b", [write(tmp_path / "3.jsonl", order(1, "-") + "\n")])
    assert (third.accepted, third.rejected) == (0, 1)
    assert dict(third.relations["orders"].rejected) == {"not_alive": 1}

    ledger.transition(Home(spark, home), 1, ledger.APPLIED)
    fold_epoch(Home(spark, home), 1)
    # Epoch 2: order 7 has one copy left in base, order 1 none.
    fourth = ingest_files(
        Home(spark, home), "a",
        [write(tmp_path / "4.jsonl", "\n".join([order(7, "-"), order(7, "-"), order(1, "-"), order(1), order(1, "-")]) + "\n")],
    )
    assert fourth.epoch == 2
    assert (fourth.accepted, fourth.rejected) == (3, 2)
    rejected = list_rows(spark, home, epoch=2, source="a")
    assert [(r["line"], r["reason"]) for r in rejected] == [(2, "not_alive"), (3, "not_alive")]


def test_error_threshold_fails_loudly_and_applies_nothing(spark, home, tmp_path):
    before = {r: len(events(spark, home, r)) for r in ("orders", "items")}
    path = write(tmp_path / "orders.csv", "o_id,o_cust,o_total,o_date,o_note\n10,1,1,2024-01-01,x\n11,1,x,y,z\n12,1,1,2024-99-01,x\n")
    with pytest.raises(IngestError, match=r"epoch \d+, source strict: 2 of 3 rows rejected \(67%\).*max_error_rate 20%") as exc:
        ingest_files(Home(spark, home), "strict", [path])
    report = exc.value.report
    assert report.failed and not report.committed
    assert {r: len(events(spark, home, r)) for r in ("orders", "items")} == before
    q = list_rows(spark, home, source="strict")
    assert [(r["line"], r["reason"]) for r in q] == [(3, "bad_value"), (4, "bad_value")]
    entry = read_rows(spark, tables_of(home).files, {"batch_id": report.batch_id})
    assert [(e["status"], e["rows_accepted"], e["rows_rejected"]) for e in entry] == [(REJECTED, 0, 2)]
    # A refused file is not taken: offered again (e.g. after raising the threshold) it is read again.
    with pytest.raises(IngestError):
        ingest_files(Home(spark, home), "strict", [path])


def test_cli_quarantine_and_epoch_status(spark, home, capsys):
    h = str(home.home)
    assert main(["--home", h, "quarantine", "list", "--source", "a", "--epoch", "1", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id,epoch,source,file,line,relation,reason,detail"
    assert len(lines) == 1 + 11
    qid = lines[1].split(",")[0]
    assert main(["--home", h, "quarantine", "show", qid]) == 0
    shown = capsys.readouterr().out
    assert "reason" in shown and "raw" in shown and "meaning" in shown
    assert main(["--home", h, "quarantine", "show", "999999"]) == ExitCode.NOT_FOUND
    assert main(["--home", h, "epoch", "status", "--format", "csv"]) == 0
    status = capsys.readouterr().out.splitlines()
    assert status[0].startswith("epoch,state,")
    assert status[1].startswith("1,applied,") and status[2].startswith("2,open,")
    assert ledger.current_epoch(pyiceberg_catalog(home), home) == 2
