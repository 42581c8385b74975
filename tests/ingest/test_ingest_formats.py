"""The landing-format readers and the row validation (pure Python, no JVM): every format's
good rows come out typed, every kind of bad row comes out with its reason and line."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ingestkit import SHOP, STANDARD_DEL, TPCH, write

from cumulus.ingest import dbtoaster
from cumulus.ingest.formats import codecs, detect_format, read_file, relation_of_file
from cumulus.ingest.parse import unit_records
from cumulus.ingest.plan import list_files, make_units, plan_files
from cumulus.ingest.validate import REASONS, Rejected, parse_op, text_converter, value_converter
from cumulus.schema import load_schema

SCHEMA = load_schema(SHOP)
CODECS = codecs(SCHEMA)


def read(path, fmt, relation=None):
    return list(read_file(path, fmt, SCHEMA, relation, CODECS))


def good(records):
    return [(r.relation, r.op, r.values) for r in records if r.reason is None]


def bad(records):
    return [(r.line, r.reason) for r in records if r.reason is not None]


# ------------------------------------------------------------------ values


def test_text_values_follow_parse_value_and_fit_the_column():
    total = text_converter(SCHEMA.relation("orders").column("o_total"))
    assert total("12.5") == Decimal("12.50")
    assert total("\\N") is None and total("") is None
    for text, what in (("12.345", "decimal places"), ("123456789.00", "too many digits"), ("abc", "not a decimal")):
        with pytest.raises(Rejected, match=what) as exc:
            total(text)
        assert exc.value.reason == "bad_value"
    key = text_converter(SCHEMA.relation("orders").column("o_id"))
    with pytest.raises(Rejected) as exc:
        key("\\N")
    assert exc.value.reason == "not_null"
    with pytest.raises(Rejected, match="out of range"):
        key(str(2**63))
    note = text_converter(SCHEMA.relation("orders").column("o_note"))
    assert note("") == "" and note("\\N") is None  # an empty string stays a string


def test_typed_values_are_strict_about_types():
    qty = value_converter(SCHEMA.relation("items").column("i_qty"))
    assert qty(3) == 3 and qty("4") == 4
    for value in (True, 3.5, Decimal("3")):
        with pytest.raises(Rejected):
            qty(value)
    total = value_converter(SCHEMA.relation("orders").column("o_total"))
    assert total(Decimal("1.5")) == Decimal("1.50") and total(2) == Decimal("2.00")
    assert total(0.25) == Decimal("0.25")
    date = value_converter(SCHEMA.relation("orders").column("o_date"))
    assert date(dt.date(2024, 1, 2)) == dt.date(2024, 1, 2) and date("2024-01-02") == dt.date(2024, 1, 2)
    with pytest.raises(Rejected):
        date(dt.datetime(2024, 1, 2, 3, 4))
    note = value_converter(SCHEMA.relation("orders").column("o_note"))
    with pytest.raises(Rejected):
        note(5)


def test_ops():
    assert [parse_op(v) for v in ("+", "-", "1", "0", "-1", "+1", "insert", "DELETE", None, "", 1, 0, -1)] == [
        1, -1, 1, -1, -1, 1, 1, -1, 1, 1, 1, -1, -1,
    ]
    for value in ("x", 2, True, "++"):
        with pytest.raises(Rejected) as exc:
            parse_op(value)
        assert exc.value.reason == "bad_op"


# ------------------------------------------------------------------ formats


def test_jsonl_envelope_and_flat(tmp_path):
    mixed = write(
        tmp_path / "batch.jsonl",
        '{"relation": "orders", "op": "+", "row": {"o_id": 1, "o_cust": 7, "o_total": 10.25, "o_date": "2024-01-02", "o_note": "hi"}}\n'
        "\n"
        '{"relation": "items", "op": "-", "row": {"i_order": 1, "i_qty": 2, "i_price": 0.5, "i_gift": true}}\n',
    )
    recs = read(mixed, "jsonl")
    assert good(recs) == [
        ("orders", 1, (1, 7, Decimal("10.25"), dt.date(2024, 1, 2), "hi")),
        ("items", -1, (1, 2, 0.5, True)),
    ]
    assert [r.line for r in recs] == [1, 3]
    assert recs[0].raw is None and recs[1].raw is not None  # deletes keep their text
    flat = write(tmp_path / "items.jsonl", '{"op": "delete", "i_order": 4, "i_qty": null, "i_price": 1, "i_gift": 0}\n')
    assert good(read(flat, "jsonl", "items")) == [("items", -1, (4, None, 1.0, False))]


def test_jsonl_rejections(tmp_path):
    path = write(
        tmp_path / "mixed.jsonl",
        "\n".join(
            [
                '{"relation": "orders", "row": {"o_id": 1, "o_cust": 1, "o_total": 1, "o_date": "2024-01-01", "o_note": "ok"}}',
                "{not json",
                '{"relation": "nope", "row": {"a": 1}}',
                '{"relation": "orders", "row": {"o_id": 2}}',
                '{"relation": "orders", "row": {"o_id": null, "o_cust": 1, "o_total": 1, "o_date": "2024-01-01", "o_note": "x"}}',
                '{"relation": "orders", "row": {"o_id": 3, "o_cust": "x", "o_total": 1, "o_date": "2024-01-01", "o_note": "x"}}',
                '{"relation": "orders", "op": "?", "row": {"o_id": 4, "o_cust": 1, "o_total": 1, "o_date": "2024-01-01", "o_note": "x"}}',
                '{"relation": "orders", "row": {"o_id": 5, "o_cust": 1, "o_total": 1, "o_date": "2024-01-01", "o_note": "x", "zz": 1}}',
                "[1, 2]",
            ]
        )
        + "\n",
    )
    recs = read(path, "jsonl")
    assert len(good(recs)) == 1
    assert bad(recs) == [
        (2, "malformed"),
        (3, "unknown_relation"),
        (4, "missing_field"),
        (5, "not_null"),
        (6, "bad_value"),
        (7, "bad_op"),
        (8, "unknown_field"),
        (9, "malformed"),
    ]
    assert all(r.raw for r in recs if r.reason)  # the raw line is kept for the quarantine


def test_csv_header_op_column_and_rejections(tmp_path):
    path = write(
        tmp_path / "orders.csv",
        "o_note,o_id,op,o_cust,o_total,o_date\n"
        '"a, quoted note",1,+,7,10.50,2024-01-02\n'
        "b,2,0,7,1,2024-01-03\n"
        "c,3,1,7\n"
        "d,4,+,7,1,2024-02-30\n"
        "e,\\N,+,7,1,2024-01-03\n"
        "f,6,x,7,1,2024-01-03\n"
        '"multi\nline",7,1,,,\n'
        "g,8,+,7,1.001,2024-01-03\n",
    )
    recs = read(path, "csv", relation_of_file(path, SCHEMA))
    assert good(recs) == [
        ("orders", 1, (1, 7, Decimal("10.50"), dt.date(2024, 1, 2), "a, quoted note")),
        ("orders", -1, (2, 7, Decimal("1.00"), dt.date(2024, 1, 3), "b")),
        ("orders", 1, (7, None, None, None, "multi\nline")),
    ]
    assert bad(recs) == [(4, "column_count"), (5, "bad_value"), (6, "not_null"), (7, "bad_op"), (10, "bad_value")]
    assert [r.line for r in recs if r.values and r.values[0] == 7] == [8]


def test_csv_header_problems_reject_every_row(tmp_path):
    missing = write(tmp_path / "items.csv", "i_order,i_qty\n1,2\n3,4\n")
    assert bad(read(missing, "csv", "items")) == [(2, "missing_field"), (3, "missing_field")]
    extra = write(tmp_path / "x" / "items.csv", "i_order,i_qty,i_price,i_gift,colour\n1,2,1.0,true,red\n")
    assert bad(read(extra, "csv", "items")) == [(2, "unknown_field")]
    nameless = write(tmp_path / "stuff.csv", "i_order,i_qty,i_price,i_gift\n1,2,1.0,true\n")
    assert bad(read(nameless, "csv", relation_of_file(nameless, SCHEMA))) == [(2, "unknown_relation")]


def test_parquet(tmp_path):
    path = tmp_path / "items.parquet"
    table = pa.table(
        {
            "i_order": pa.array([1, 2, None, 4], pa.int64()),
            "i_qty": pa.array([5, None, 1, 2], pa.int64()),
            "i_price": pa.array([0.5, 1.5, 2.0, 3.0]),
            "i_gift": pa.array([True, False, None, True]),
            "op": pa.array(["+", "-", "+", "?"]),
        }
    )
    pq.write_table(table, path)
    recs = read(path, "parquet", "items")
    assert good(recs) == [("items", 1, (1, 5, 0.5, True)), ("items", -1, (2, None, 1.5, False))]
    assert bad(recs) == [(3, "not_null"), (4, "bad_op")]
    assert json.loads(recs[2].raw)["i_order"] is None
    broken = write(tmp_path / "orders.parquet", "not parquet")
    assert bad(read(broken, "parquet", "orders")) == [(0, "malformed")]


def test_dbtoaster_matches_the_reference_reader():
    """Every row of the standard_del stream reads as cumulus.ingest.dbtoaster reads it."""
    schema = load_schema(TPCH)
    cm = codecs(schema)
    files = plan_files([STANDARD_DEL], None, None, schema)
    assert sorted(f.fmt for f in files) == ["dbtoaster"] * 8  # *_active.csv are skipped
    _, units = make_units(files)
    assert len(units) == 1 and units[0].interleave
    ours = [(r.op, r.relation, r.values) for _, _, r in unit_records(units[0], schema, cm)]
    ref = [(1 if s.event.sign == "+" else -1, s.event.relation, s.event.values) for s in dbtoaster.read_stream(STANDARD_DEL, schema)]
    assert ours == ref  # same rows in the same order: static rows, then by event number


def test_dbtoaster_rejections(tmp_path):
    path = write(
        tmp_path / "items.csv",
        "1|1|10|2|0.5|true\n"  # event 1: insert
        "2|0|10|2|0.5|true\n"  # event 2: delete
        "11|2|1.0|false\n"  # static row
        "x|1|10|2|0.5|true\n"
        "3|7|10|2|0.5|true\n"
        "3|1|10\n"
        "4|1|\\N|2|0.5|true\n"
        "5|1|10|two|0.5|true\n",
    )
    recs = read(path, "dbtoaster", "items")
    assert [(r.op, r.values, r.order) for r in recs if r.reason is None] == [
        (1, (10, 2, 0.5, True), 1),
        (-1, (10, 2, 0.5, True), 2),
        (1, (11, 2, 1.0, False), -1),
    ]
    assert bad(recs) == [(4, "malformed"), (5, "bad_op"), (6, "column_count"), (7, "not_null"), (8, "bad_value")]


def test_format_detection_and_listing(tmp_path):
    assert detect_format(STANDARD_DEL / "orders.csv", SCHEMA) == "dbtoaster"
    header = write(tmp_path / "orders.csv", "o_id,o_cust\n1,2\n")
    assert detect_format(header, SCHEMA) == "csv"
    assert detect_format(write(tmp_path / "x.jsonl", "{}"), SCHEMA) == "jsonl"
    assert detect_format(write(tmp_path / "x.dat", "1|2"), SCHEMA) == "dbtoaster"
    assert detect_format(write(tmp_path / "x.txt", "1|2"), SCHEMA) is None
    write(tmp_path / ".hidden.csv", "")
    write(tmp_path / "_SUCCESS", "")
    write(tmp_path / "sub" / "items.parquet", "")
    names = [p.name for p, _ in list_files([tmp_path], None, SCHEMA)]
    assert names == ["orders.csv", "items.parquet", "x.dat", "x.jsonl"]  # by relative path
    assert relation_of_file("orders.part-3.csv", SCHEMA) == "orders"


def test_every_reason_is_documented():
    assert set(REASONS) == {
        "column_count", "bad_value", "unknown_relation", "missing_field", "unknown_field",
        "not_null", "bad_op", "malformed", "not_alive",
    }


def test_static_dbtoaster_files_are_units_of_their_own_before_the_stream(tmp_path):
    write(tmp_path / "orders.csv", "1|1|1|7|1.5|2024-01-01|a\n")  # events
    write(tmp_path / "items.tbl", "1|2|0.5|true|\n")  # static, dbgen-style trailing |
    write(tmp_path / "later" / "orders.dat", "2|7|1.5|2024-01-01|b\n")  # static
    files, units = make_units(plan_files([tmp_path], None, None, SCHEMA))
    assert [(u.interleave, [f.path.rsplit("/", 1)[1] for f in u.files]) for u in units] == [
        (False, ["items.tbl"]),
        (True, ["orders.csv"]),
        (False, ["orders.dat"]),
    ]
    assert [f.unit for f in files] == [0, 2, 1]  # files keep their batch (path) order


def test_one_relation_of_a_dbtoaster_folder_keeps_its_places():
    """Reading one relation of a folder (the others only scanned for their event-order
    numbers) gives that relation's rows the positions a full read gives them."""
    schema = load_schema(TPCH)
    cm = codecs(schema)
    _, [unit] = make_units(plan_files([STANDARD_DEL], None, None, schema))
    full = list(unit_records(unit, schema, cm))
    for name in ("orders", "lineitem", "nation"):
        mine = [(f, p, r) for f, p, r in unit_records(unit, schema, cm, only=name) if r.relation == name]
        assert mine == [(f, p, r) for f, p, r in full if r.relation == name]


def test_a_relation_file_keeps_every_row_in_its_relation(tmp_path):
    """orders.jsonl is read in the orders pass only: a row naming another relation is
    rejected there, never lost."""
    path = write(
        tmp_path / "orders.jsonl",
        '{"relation": "items", "row": {"i_order": 1, "i_qty": 1, "i_price": 1, "i_gift": true}}\n'
        '{"relation": "nope", "row": {}}\n',
    )
    recs = read(path, "jsonl", "orders")
    assert [(r.relation, r.line, r.reason) for r in recs] == [
        ("orders", 1, "unknown_relation"),
        ("orders", 2, "unknown_relation"),
    ]


def test_the_relation_passes_see_every_row_exactly_once(tmp_path):
    import pyarrow as pa

    from cumulus.ingest.parse import make_parser, units_for

    write(tmp_path / "mixed.jsonl", '{"relation": "orders", "row": {"o_id": 1}}\n{bad\n{"relation": "zz", "row": {}}\n'
          '{"relation": "items", "op": "-", "row": {"i_order": 1, "i_qty": 1, "i_price": 1, "i_gift": true}}\n')
    write(tmp_path / "orders.csv", "o_id,o_cust,o_total,o_date,o_note\n1,2,3,2024-01-01,a\n2,x,3,2024-01-01,b\n")
    write(tmp_path / "stream" / "orders.csv", "1|1|5|7|1.5|2024-01-01|a\n2|0|5|7|1.5|2024-01-01|a\n")
    write(tmp_path / "stream" / "items.csv", "1|1|5|2|0.5|true\nbroken\n")
    write(tmp_path / "stuff.csv", "a,b\n1,2\n")
    write(tmp_path / "items.tbl", "7|2|0.5|true|\n")
    files, units = make_units(plan_files([tmp_path], None, None, SCHEMA))
    expected = sorted((u.index, p) for u in units for _, p, _ in unit_records(u, SCHEMA, CODECS))
    seen = []
    for only in [*SCHEMA.names, None]:
        parse = make_parser(units, SCHEMA, only)
        ids = pa.record_batch([pa.array([u.index for u in units_for(units, only)], pa.int32())], names=["u"])
        for batch in parse(iter([ids])):
            seen += list(zip(batch.column("__unit").to_pylist(), batch.column("__pos").to_pylist(), strict=True))
    assert sorted(seen) == expected and len(expected) == 13
