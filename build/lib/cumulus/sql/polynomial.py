"""Polynomials of single-relation factors (calculus.Monomial lists), as the front end
builds SUM's argument, CASE and filter factors: products that keep one factor per atom,
and indicators [c] of conditions over several relations as sums of products of
single-relation indicators (`Terms`: (coefficient, {atom: condition}); atom -1 for a
condition without columns)."""

from __future__ import annotations

from cumulus.m3.ast import And, BinOp, Cond, Const, Expr, If, Neg
from cumulus.m3.printer import format_cond
from cumulus.schema import DECIMAL, FLOAT, INT
from cumulus.sql.calculus import Monomial, one

Terms = list[tuple[int, dict[int, Cond]]]


def neg(c: Expr) -> Expr:
    if isinstance(c, Const) and c.type in (INT, DECIMAL, FLOAT):
        return Const(-c.value, c.type)  # type: ignore[operator]
    return Neg(c)


def product(a: list[Monomial], b: list[Monomial]) -> list[Monomial]:
    """The product of two polynomials of single-relation factors."""
    return [times(x, y) for x in a for y in b]


def times(a: Monomial, b: Monomial) -> Monomial:
    """The product of two monomials; factors of the same atom are multiplied together."""
    coef = mul(a.coef, b.coef)
    factors: dict[int, Expr] = {}
    for i, f in a.factors + b.factors:
        factors[i] = mul(factors[i], f) if i in factors else f
    return Monomial(coef, tuple(sorted(factors.items(), key=lambda kv: kv[0])))


def mul(a: Expr, b: Expr) -> Expr:
    if a == one():
        return b
    if b == one():
        return a
    if isinstance(a, Const) and isinstance(b, Const) and a.type == b.type == INT:
        return Const(a.value * b.value, INT)  # type: ignore[operator]
    return BinOp("*", a, b)


def ind_and(a: Terms, b: Terms) -> Terms:
    out = []
    for ka, da in a:
        for kb, db in b:
            d = dict(da)
            for atom, c in db.items():
                d[atom] = c if atom not in d or d[atom] == c else And(d[atom], c)
            out.append((ka * kb, d))
    return ind_sum(out)


def ind_sum(terms: Terms) -> Terms:
    """Terms with equal conditions added up; zero terms dropped."""
    acc: dict[tuple, tuple[int, dict[int, Cond]]] = {}
    for k, d in terms:
        key = tuple(sorted((atom, format_cond(c)) for atom, c in d.items()))
        acc[key] = (acc[key][0] + k, d) if key in acc else (k, d)
    return [t for t in acc.values() if t[0] != 0]


def monomials(terms: Terms) -> list[Monomial]:
    out = []
    for k, d in terms:
        coef: Expr = Const(k, INT)
        factors = []
        for atom, c in sorted(d.items(), key=lambda kv: kv[0]):
            indicator = If(c, one(), Const(0, INT))
            if atom < 0:
                coef = mul(coef, indicator)
            else:
                factors.append((atom, indicator))
        out.append(Monomial(coef, tuple(factors)))
    return out


