"""The reference interpreter: the paper's hand-written Example 2.1 program against DuckDB
running example21.sql, and M3's semantics in small cases (zero entries, exact decimals,
NULLs, pre-event reads)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from oracle import DuckOracle

from cumulus.errors import InterpreterError
from cumulus.ingest.dbtoaster import read_events
from cumulus.ingest.synthetic import alive_rows, generate_events, write_dbtoaster
from cumulus.m3.interpreter import Event, Interpreter
from cumulus.m3.parser import parse_program
from cumulus.m3.validate import validate
from cumulus.schema import load_schema, parse_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHARED = Path(__file__).resolve().parents[3] / "shared"
PAPER = load_schema(FIXTURES / "schemas" / "paper.sql")


def checked(text: str, schema=PAPER):
    return validate(parse_program(text), schema, text)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_example21_q_equals_the_sql_over_surviving_rows(seed: int, tmp_path) -> None:
    program = checked((SHARED / "examples" / "example21.m3").read_text())
    events = generate_events(PAPER, 2000, seed=seed, domain=5, delete_ratio=0.35)
    assert sum(e.sign == "-" for e in events) > 300
    # Through the DBToaster file format, as the CLI reads it.
    folder = write_dbtoaster(events, tmp_path / "stream", PAPER)
    interp = Interpreter(program).run(read_events(folder, PAPER))
    want = DuckOracle(PAPER, alive_rows(events)).query((SHARED / "examples" / "example21.sql").read_text())
    # q holds no zero entries and no group whose sum is NULL (M3 maps hold numbers).
    expected = {(part, nation): rev for nation, part, rev in want if rev is not None and rev != 0}
    assert interp.entries("q") == expected


def test_entries_reaching_zero_are_removed_and_decimals_stay_exact() -> None:
    schema = parse_schema("CREATE TABLE f (k INT, d DECIMAL(10,2));")
    interp = Interpreter(checked("ON +F(K, D) DO { s[K] += D; }", schema))
    for d in ("0.06", "0.01"):
        interp.process(Event("+", "f", (1, Decimal(d))))
    assert interp.entries("s") == {(1,): Decimal("0.07")}
    interp.process(Event("-", "f", (1, Decimal("0.07"))))
    assert interp.entries("s") == {}


def test_the_journal_sums_every_update_per_entry_zero_sums_included() -> None:
    schema = parse_schema("CREATE TABLE f (k INT, d DECIMAL(10,2));")
    interp = Interpreter(checked("ON +F(K, D) DO { s[K] += D; n[] += 1; }", schema))
    interp.process(Event("+", "f", (1, Decimal("0.50"))))
    before = {m: interp.entries(m) for m in ("s", "n")}
    interp.journal = {}
    for sign, k, d in (("+", 1, "0.25"), ("+", 2, "1.00"), ("-", 2, "1.00"), ("+", 1, "0.25")):
        interp.process(Event(sign, "f", (k, Decimal(d))))
    assert interp.journal == {("s", (1,)): Decimal("0.50"), ("s", (2,)): Decimal("0.00"), ("n", ()): 2}
    for m, entries in before.items():  # the state moved by exactly the journal's sums
        moved = {key: v + interp.journal.get((m, key), 0) for key, v in entries.items()}
        moved |= {key: v for (name, key), v in interp.journal.items() if name == m and key not in entries}
        assert {key: v for key, v in moved.items() if v != 0} == interp.entries(m)


def test_statements_read_the_state_before_the_event() -> None:
    schema = parse_schema("CREATE TABLE r (a INT);")
    program = checked("ON +R(A) DO { n[] += 1; seen[] += n[]; }", schema)
    interp = Interpreter(program)
    for a in (1, 2, 3):
        interp.process(Event("+", "r", (a,)))
    assert interp.entries("seen") == {(): 0 + 1 + 2}


def test_null_keys_match_nothing_and_null_terms_add_nothing() -> None:
    schema = parse_schema("CREATE TABLE r (a INT, b INT); CREATE TABLE s (b INT, c DECIMAL(5,1));")
    text = """
    ON +R(A, B) DO { q[A] += m[B]; }
    ON +S(B, C) DO { m[B] += C; cnt[B] += 1; }
    """
    interp = Interpreter(checked(text, schema))
    interp.process(Event("+", "s", (None, Decimal("2.0"))))
    interp.process(Event("+", "s", (1, None)))
    interp.process(Event("+", "s", (1, Decimal("3.0"))))
    interp.process(Event("+", "r", (7, None)))
    interp.process(Event("+", "r", (8, 1)))
    assert interp.entries("m") == {(None,): Decimal("2.0"), (1,): Decimal("3.0")}
    assert interp.entries("cnt") == {(None,): 1, (1,): 2}
    assert interp.entries("q") == {(8,): Decimal("3.0")}


def test_conditions_are_three_valued() -> None:
    schema = parse_schema("CREATE TABLE r (a INT, b INT);")
    text = "ON +R(A, B) DO { yes[] += IF NOT (A > 1) THEN 1 ELSE 0; no[] += IF NOT (A > 1) THEN 0 ELSE 1; }"
    interp = Interpreter(checked(text, schema))
    interp.process(Event("+", "r", (None, 1)))  # NOT unknown is unknown: ELSE both times
    assert interp.entries("yes") == {} and interp.entries("no") == {(): 1}


def test_bad_events_are_refused_clearly() -> None:
    interp = Interpreter(checked((SHARED / "examples" / "example21.m3").read_text()))
    with pytest.raises(InterpreterError, match="unknown relation 'suppliers'"):
        interp.process(Event("+", "suppliers", (1,)))
    with pytest.raises(InterpreterError, match="has 2 values; orders has 3 columns"):
        interp.process(Event("+", "orders", (1, 2)))
