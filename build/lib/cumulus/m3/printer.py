"""AST -> M3 text. The output parses back to an equal tree (tests check every fixture),
in the paper's style: relations and variables upper case, maps lower case. Optional
`docs` put a `--` comment above each map declaration (the compiler's SQL for the map)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from cumulus.m3.ast import (
    And,
    BinOp,
    Call,
    Cmp,
    Cond,
    Const,
    Expr,
    If,
    IsNull,
    Like,
    MapDecl,
    MapRef,
    Neg,
    Not,
    Or,
    Program,
    Statement,
    Trigger,
    Var,
)
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, STRING

_TYPE_NAMES = {"int": "INT", "decimal": "DECIMAL", "float": "FLOAT", "string": "STRING", "date": "DATE", "bool": "BOOL"}

# Precedence: higher binds tighter.
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def format_const(c: Const) -> str:
    v = c.value
    if v is None:
        return "NULL"
    if c.type == STRING:
        return "'" + str(v).replace("'", "''") + "'"
    if c.type == BOOL:
        return "TRUE" if v else "FALSE"
    if c.type == DATE:
        assert isinstance(v, dt.date)
        return f"DATE '{v.isoformat()}'"
    if c.type == DECIMAL:
        text = format(Decimal(v), "f")
        return text if "." in text else text + ".0"
    if c.type == FLOAT:
        return repr(float(v)) if "e" in repr(float(v)) else f"{float(v)!r}e0"
    return str(v)


def _prec(e: Expr) -> int:
    if isinstance(e, BinOp):
        return _PREC[e.op]
    if isinstance(e, Neg):
        return 3
    if isinstance(e, If):
        return 0
    return 4


def format_expr(e: Expr) -> str:
    if isinstance(e, Const):
        return format_const(e)
    if isinstance(e, Var):
        return e.name.upper()
    if isinstance(e, MapRef):
        return f"{e.name}[{', '.join(format_expr(a) for a in e.args)}]"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Neg):
        inner = format_expr(e.operand)
        # Parenthesize anything but atoms, and negative constants (`--` starts a comment).
        return f"-({inner})" if _prec(e.operand) < 4 or inner.startswith("-") else f"-{inner}"
    if isinstance(e, If):
        return f"IF {format_cond(e.cond)} THEN {format_expr(e.then)} ELSE {format_expr(e.else_)}"
    if isinstance(e, BinOp):
        p = _PREC[e.op]
        left = format_expr(e.left)
        if _prec(e.left) < p:
            left = f"({left})"
        right = format_expr(e.right)
        # Left-associative: an equal-precedence right operand needs parentheses.
        if _prec(e.right) <= p:
            right = f"({right})"
        return f"{left} {e.op} {right}"
    if isinstance(e, Cond):
        return f"({format_cond(e)})"
    raise TypeError(f"cannot print {e!r}")


def format_cond(c: Cond) -> str:
    if isinstance(c, Cmp):
        return f"{_operand(c.left)} {c.op} {_operand(c.right)}"
    if isinstance(c, IsNull):
        return f"{_operand(c.operand)} IS {'NOT ' if c.negated else ''}NULL"
    if isinstance(c, Like):
        pattern = c.pattern.replace("'", "''")
        return f"{_operand(c.operand)} {'NOT ' if c.negated else ''}LIKE '{pattern}'"
    if isinstance(c, Not):
        return f"NOT {_cond_operand(c.operand, Not)}"
    if isinstance(c, And):
        return f"{_cond_operand(c.left, And, left=True)} AND {_cond_operand(c.right, And)}"
    if isinstance(c, Or):
        return f"{_cond_operand(c.left, Or, left=True)} OR {_cond_operand(c.right, Or)}"
    raise TypeError(f"cannot print condition {c!r}")


def _operand(e: Expr) -> str:
    """An expression inside a comparison: parenthesize IF so THEN/ELSE cannot swallow it."""
    text = format_expr(e)
    return f"({text})" if isinstance(e, If) else text


_COND_PREC = {Or: 1, And: 2, Not: 3}


def _cond_operand(c: Cond, parent: type, left: bool = False) -> str:
    text = format_cond(c)
    mine = _COND_PREC.get(type(c), 4)
    theirs = _COND_PREC[parent]
    if mine < theirs or (mine == theirs and not left and parent is not Not):
        return f"({text})"
    return text


def format_decl(d: MapDecl) -> str:
    keys = ", ".join(f"{k.upper()}: {_TYPE_NAMES[t]}" for k, t in d.keys)
    return f"DECLARE MAP {d.name}[{keys}] : {_TYPE_NAMES[d.type]};"


def format_statement(s: Statement) -> str:
    return f"{format_expr(s.target)} += {format_expr(s.expr)};"


def format_trigger(t: Trigger, indent: str = "  ") -> str:
    params = ", ".join(p.upper() for p in t.params)
    body = "".join(f"{indent}{format_statement(s)}\n" for s in t.statements)
    return f"ON {t.sign}{t.relation.upper()}({params}) DO {{\n{body}}}"


def format_program(p: Program, docs: dict[str, str] | None = None) -> str:
    """The program as text. `docs` maps a map name to a comment printed above its
    declaration (one `--` line per line of the comment)."""
    docs = docs or {}
    parts: list[str] = []
    for d in p.decls:
        comment = "".join(f"-- {line}\n" for line in docs.get(d.name, "").splitlines())
        parts.append(comment + format_decl(d))
    out = "\n".join(parts)
    if parts:
        out += "\n\n"
    out += "\n\n".join(format_trigger(t) for t in p.triggers)
    return out + "\n"


# The version of M3's semantics: bumped whenever the same program text evaluates to other
# values (2: a sum without map references is one scalar, NULL when an operand is), so that
# a home's maps written under the old meaning are rebuilt (cumulus.engine.recompute).
SEMANTICS = 2


def fingerprint(p: Program) -> str:
    """A short hash of the program as printed and of SEMANTICS: equal exactly when two
    programs keep the same maps with the same meaning."""
    import hashlib

    return hashlib.sha256(f"M3 semantics {SEMANTICS}\n{format_program(p)}".encode()).hexdigest()[:20]
