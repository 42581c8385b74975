"""The language commands end to end through `cumulus.cli.main`: m3 check/fmt, compile,
interpret (a program's maps, a view's rows as CSV)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from oracle import DuckOracle

from cumulus.cli import main
from cumulus.ingest.dbtoaster import read_events
from cumulus.ingest.synthetic import alive_rows, generate_events, write_dbtoaster
from cumulus.schema import load_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHARED = Path(__file__).resolve().parents[3] / "shared"
PAPER_SCHEMA = str(FIXTURES / "schemas" / "paper.sql")
TPCH_SCHEMA = str(FIXTURES / "schemas" / "tpch.sql")
EX21 = str(FIXTURES / "m3" / "good" / "example21.m3")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_m3_check_prints_maps_depths_and_dataflow(capsys) -> None:
    code, out, _ = run(capsys, "m3", "check", EX21, "--schema", PAPER_SCHEMA)
    assert code == 0
    assert "q   [part: int, nation: int] -> decimal   depth 2" in out
    assert "+-ORDERS       q <- m4, m5" in out
    assert "derived triggers" in out


def test_m3_fmt_output_is_stable(capsys, tmp_path) -> None:
    _, once, _ = run(capsys, "m3", "fmt", EX21)
    path = tmp_path / "p.m3"
    path.write_text(once)
    _, twice, _ = run(capsys, "m3", "fmt", str(path))
    assert once == twice and "ON +LINEITEMS(OID, PRICE, PART) DO {" in once


def test_errors_exit_2_with_position(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.m3"
    bad.write_text("ON +ORDERS(CID, OID) DO {\n  q[CID] += 1;\n}\n")
    code, _, err = run(capsys, "m3", "check", str(bad), "--schema", PAPER_SCHEMA)
    assert code == 2
    assert "binds 2 variables but relation orders has 3 columns" in err and "line 1, col 1" in err
    view = tmp_path / "v.sql"
    view.write_text("SELECT COUNT(*) FROM orders\nWHERE cid > (SELECT MIN(oid) FROM orders) OR cid = 1")
    code, _, err = run(capsys, "compile", str(view), "--schema", PAPER_SCHEMA)
    assert code == 2 and "a subquery here is not supported" in err and "line 2, col 14" in err


def test_compile_shows_sharing(capsys) -> None:
    views = FIXTURES / "views" / "tpch"
    code, out, _ = run(
        capsys, "compile", str(views / "order_priority_mix.sql"), str(views / "order_size_classes.sql"),
        "--schema", TPCH_SCHEMA, "--check",
    )
    assert code == 0
    assert "DECLARE MAP order_priority_mix_count" in out
    assert "-- SELECT orders.o_orderpriority, COUNT(*) FROM orders GROUP BY orders.o_orderpriority" in out


def test_interpret_program_prints_each_map_and_one_map(capsys, tmp_path) -> None:
    schema = load_schema(PAPER_SCHEMA)
    events = generate_events(schema, 300, seed=5)
    folder = write_dbtoaster(events, tmp_path / "stream", schema)
    code, out, _ = run(capsys, "interpret", "--schema", PAPER_SCHEMA, "--program", EX21, "--events", str(folder), "--input-format", "dbtoaster", "--map", "q")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["part", "nation", "value"]
    want = DuckOracle(schema, alive_rows(events)).query(
        "SELECT l.part, c.nation, SUM(o.discount * l.price) FROM customers c, orders o, lineitems l "
        "WHERE c.cid = o.cid AND o.oid = l.oid GROUP BY ALL HAVING SUM(o.discount * l.price) <> 0"
    )
    assert len(rows) - 1 == len(want)
    code, out, _ = run(capsys, "interpret", "--schema", PAPER_SCHEMA, "--program", EX21, "--events", str(folder))
    assert out.count("# map ") == 6


def test_interpret_view_prints_csv_in_select_order_with_iso_dates(capsys) -> None:
    stream = SHARED / "data" / "dbtoaster" / "tpch" / "standard_del"
    view = FIXTURES / "views" / "tpch" / "customer_order_extremes.sql"
    code, out, _ = run(capsys, "interpret", "--schema", TPCH_SCHEMA, "--view", str(view), "--events", str(stream), "--input-format", "dbtoaster")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["o_custkey", "smallest", "largest", "first_order", "last_order"]
    schema = load_schema(TPCH_SCHEMA)
    alive = alive_rows(read_events(stream, schema))
    want = DuckOracle(schema, alive).query(view.read_text())
    as_text = sorted([str(r[0]), f"{r[1]:.2f}", f"{r[2]:.2f}", r[3].isoformat(), r[4].isoformat()] for r in want)
    assert sorted(rows[1:]) == as_text


def test_m3_check_of_views_shows_which_views_share_each_map(capsys) -> None:
    views = FIXTURES / "views" / "tpch"
    code, out, _ = run(
        capsys, "m3", "check", str(views / "customers_per_nation.sql"), str(views / "same_nation_customers.sql"),
        str(views / "q10_returned_items.sql"), "--schema", TPCH_SCHEMA,
    )
    assert code == 0 and "3 view(s) compiled: ok" in out
    shared = [line for line in out.splitlines() if "shared by" in line]
    assert shared, out
    assert all("," in line.split("shared by")[1] for line in shared)
