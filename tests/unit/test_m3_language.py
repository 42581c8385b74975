"""M3 parser, printer and validator, driven by fixture files: good programs round-trip
through the printer; bad ones fail with the message and position in their first line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cumulus.errors import M3SyntaxError, M3ValidationError
from cumulus.m3.ast import Const, If, MapRef, Neg, Var
from cumulus.m3.dataflow import dataflow
from cumulus.m3.parser import parse_expr, parse_program
from cumulus.m3.printer import format_program
from cumulus.m3.validate import validate
from cumulus.schema import load_schema, parse_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
M3 = FIXTURES / "m3"
SIMPLE = load_schema(FIXTURES / "schemas" / "simple.sql")
PAPER = load_schema(FIXTURES / "schemas" / "paper.sql")


def expectation(path: Path) -> tuple[str, int, int]:
    m = re.match(r"-- error: (.*) @ (\d+):(\d+)", path.read_text().splitlines()[0])
    assert m, f"{path} must start with '-- error: <message> @ <line>:<col>'"
    return m.group(1), int(m.group(2)), int(m.group(3))


@pytest.mark.parametrize("path", sorted((M3 / "good").glob("*.m3")), ids=lambda p: p.stem)
def test_print_parse_round_trip(path: Path) -> None:
    program = parse_program(path.read_text(), str(path))
    printed = format_program(program)
    assert parse_program(printed) == program
    assert format_program(parse_program(printed)) == printed  # printing is a fixed point


@pytest.mark.parametrize("path", sorted((M3 / "bad_syntax").glob("*.m3")), ids=lambda p: p.stem)
def test_syntax_errors_name_what_and_where(path: Path) -> None:
    message, line, col = expectation(path)
    with pytest.raises(M3SyntaxError) as info:
        parse_program(path.read_text(), path.name)
    err = info.value
    assert message in str(err)
    assert (err.pos.line, err.pos.col) == (line, col), str(err)
    assert f"line {line}, col {col}" in str(err)
    assert "^" in str(err)  # the offending text is marked


@pytest.mark.parametrize("path", sorted((M3 / "invalid").glob("*.m3")), ids=lambda p: p.stem)
def test_validation_errors_name_the_rule(path: Path) -> None:
    message, line, col = expectation(path)
    text = path.read_text()
    program = parse_program(text, path.name)
    with pytest.raises(M3ValidationError) as info:
        validate(program, SIMPLE, text)
    assert message in str(info.value)
    assert (info.value.pos.line, info.value.pos.col) == (line, col), str(info.value)


def test_identifiers_are_case_insensitive() -> None:
    upper = parse_program("ON +R(A, B) DO { Q[A] += M[B] * A; } ON +S(B, C) DO { m[b] += c; }")
    lower = parse_program("on +r(a, b) do { q[a] += m[b] * a; } on +s(b, c) do { M[B] += C; }")
    assert upper == lower


def test_example21_validates_with_types_and_derived_deletes() -> None:
    text = (M3 / "good" / "example21.m3").read_text()
    checked = validate(parse_program(text), PAPER, text)
    assert checked.maps["q"].key_types == ("int", "int")
    assert checked.maps["q"].type == "decimal"
    assert checked.maps["m5"].type == "int"
    assert set(checked.derived) == {"-lineitems", "-orders", "-customers"}
    derived = checked.program.trigger("-", "orders")
    plus = checked.program.trigger("+", "orders")
    assert [s.target for s in derived.statements] == [s.target for s in plus.statements]
    assert all(isinstance(s.expr, Neg) for s in derived.statements)


def test_written_delete_trigger_is_kept() -> None:
    text = (M3 / "good" / "self_join.m3").read_text()
    checked = validate(parse_program(text), SIMPLE, text)
    assert checked.derived == ()


def test_declared_type_narrower_than_statements_is_refused() -> None:
    text = "DECLARE MAP q[A: INT] : INT;\nON +R(A, B) DO { q[A] += 0.5; }"
    with pytest.raises(M3ValidationError, match="declared INT but its statements produce DECIMAL"):
        validate(parse_program(text), SIMPLE, text)


def test_float_columns_make_float_maps() -> None:
    schema = parse_schema("CREATE TABLE f (k INT, x DOUBLE, d DECIMAL(10,2));")
    text = "ON +F(K, X, D) DO { a[K] += X * D; b[K] += D * 2; c[K] += 1; }"
    maps = validate(parse_program(text), schema, text).maps
    assert (maps["a"].type, maps["b"].type, maps["c"].type) == ("float", "decimal", "int")


def test_expression_precedence_and_negative_constants() -> None:
    e = parse_expr("1 - 2 - 3 * -4")
    assert e.left.op == "-" and e.right.op == "*"
    assert e.right.right == Const(-4, "int")
    assert isinstance(parse_expr("IF A > 1 THEN 2 ELSE 0"), If)
    assert parse_expr("m[A, 1]") == MapRef("m", (Var("a"), Const(1, "int")))


def test_dataflow_depth_order_and_cycles() -> None:
    flow = dataflow(parse_program((M3 / "good" / "example21.m3").read_text()))
    assert flow.depth == {"q": 2, "m1": 1, "m2": 1, "m3": 0, "m4": 0, "m5": 0}
    order = list(flow.order)
    for edge in flow.edges:
        for source in edge.sources:
            assert order.index(source) < order.index(edge.target)
    assert flow.cycles == ()
    cyclic = dataflow(parse_program((M3 / "good" / "cycle.m3").read_text()))
    assert set(cyclic.cycles[0]) == {"m1", "m2"}
    assert cyclic.depth == {"m1": None, "m2": None}
