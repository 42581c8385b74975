"""The M3 abstract syntax tree: immutable values produced by the parser and the SQL
compiler, consumed by the validator, the printer, the interpreter and the Spark engine.

Positions are carried for error messages but excluded from equality, so a program that
is printed and parsed back compares equal to the original.

Semantics in brief (cumulus/m3/interpreter.py is the executable definition):
- `ON +R(x, y) DO { m[k] += e; ... }` runs for each inserted tuple of R (`-R`: deleted).
- Every statement of one trigger reads the maps as they were before the event.
- A statement's right-hand side is a sum of terms (top-level `+`/`-`); in each term the
  variables that the trigger does not bind (loop variables) range over the entries of
  the map factor that holds them; the term is added to the target entry those bind.
- SQL NULLs: arithmetic with NULL is NULL and a NULL term adds nothing; comparisons with
  NULL are unknown (IF takes ELSE); a map factor looked up with a NULL bound key matches
  nothing (as an SQL equi-join never matches NULL).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from cumulus.errors import Position

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> tuple[Expr, ...]:
        """This expression and every expression inside it, in pre-order. Kept once
        computed (the tree is immutable): the validator, the compiler and the engine walk
        the same statements many times (a program of the view corpus, millions of times)."""
        nodes = self.__dict__.get("_walk")
        if nodes is None:
            nodes = (self, *(n for child in self.children() for n in child.walk()))
            object.__setattr__(self, "_walk", nodes)
        return nodes


@dataclass(frozen=True)
class Const(Expr):
    """A constant; `type` is one of cumulus.schema's type names."""

    value: object
    type: str
    pos: Position | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Var(Expr):
    name: str
    pos: Position | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MapRef(Expr):
    name: str
    args: tuple[Expr, ...]
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class BinOp(Expr):
    """`+`, `-` or `*`."""

    op: str
    left: Expr
    right: Expr
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Neg(Expr):
    operand: Expr
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Call(Expr):
    """A scalar function of event values, e.g. `YEAR(D)` (see FUNCTIONS)."""

    func: str
    args: tuple[Expr, ...]
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class If(Expr):
    """`IF cond THEN then ELSE else_`; the paper's form has `ELSE 0`."""

    cond: Cond
    then: Expr
    else_: Expr
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.then, self.else_)


# ---------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Cond(Expr):
    """A condition of an IF: three-valued (true, false, unknown) as in SQL."""


@dataclass(frozen=True)
class Cmp(Cond):
    op: str  # = <> < <= > >=
    left: Expr
    right: Expr
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class IsNull(Cond):
    operand: Expr
    negated: bool = False
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Like(Cond):
    """`operand [NOT] LIKE 'pattern'`: SQL LIKE over a string, `%` any run of characters,
    `_` exactly one, every other character itself (no escape character)."""

    operand: Expr
    pattern: str
    negated: bool = False
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class And(Cond):
    left: Cond
    right: Cond
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Or(Cond):
    left: Cond
    right: Cond
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Not(Cond):
    operand: Cond
    pos: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")
# Scalar functions: name -> (argument types, result type). An argument type "number"
# takes int, decimal or float. TO_FLOAT is SQL's CAST(x AS DOUBLE), TO_DECIMAL an int's
# CAST(x AS DECIMAL(p, s)) (exact; a decimal's such cast, where it loses no digit, is the
# decimal itself).
FUNCTIONS = {
    "YEAR": (("date",), "int"),
    "MONTH": (("date",), "int"),
    "DAY": (("date",), "int"),
    "TO_FLOAT": (("number",), "float"),
    "TO_DECIMAL": (("int",), "decimal"),
    "SUBSTR": (("string", "int", "int"), "string"),  # SQL's SUBSTRING(s FROM start FOR length), start >= 1
}
ARGUMENT_KINDS = {"number": ("int", "decimal", "float")}

# ---------------------------------------------------------------- program


@dataclass(frozen=True)
class MapDecl:
    """`DECLARE MAP name[K1: type, ...] : type;` (optional; the validator infers types)."""

    name: str
    keys: tuple[tuple[str, str], ...]
    type: str
    pos: Position | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Statement:
    target: MapRef
    expr: Expr
    pos: Position | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Trigger:
    sign: str  # "+" insert, "-" delete
    relation: str
    params: tuple[str, ...]
    statements: tuple[Statement, ...]
    pos: Position | None = field(default=None, compare=False, repr=False)

    @property
    def event(self) -> str:
        return f"{self.sign}{self.relation}"


@dataclass(frozen=True)
class Program:
    decls: tuple[MapDecl, ...]
    triggers: tuple[Trigger, ...]

    def trigger(self, sign: str, relation: str) -> Trigger | None:
        for t in self.triggers:
            if t.sign == sign and t.relation == relation:
                return t
        return None

    @property
    def relations(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.relation for t in self.triggers))

    def statements(self) -> Iterator[tuple[Trigger, Statement]]:
        for t in self.triggers:
            for s in t.statements:
                yield t, s

    @property
    def map_names(self) -> tuple[str, ...]:
        """Every map the program declares, writes or reads, in order of first mention."""
        names = [d.name for d in self.decls]
        for _, stmt in self.statements():
            names.append(stmt.target.name)
            names.extend(e.name for e in stmt.expr.walk() if isinstance(e, MapRef))
        return tuple(dict.fromkeys(names))


# ---------------------------------------------------------------- helpers


def variables(expr: Expr) -> set[str]:
    return {e.name for e in expr.walk() if isinstance(e, Var)}


def terms(expr: Expr) -> list[tuple[int, list[Expr]]]:
    """Split a right-hand side into its additive terms, each a sign and a list of
    factors (the flattened top-level product). `a * (b + c)` stays one term, and so does
    a sum without map references (`REVENUE - 1.25`): it is one scalar, NULL when an
    operand is, as in SQL; splitting it would add `-1.25` for a row whose REVENUE is NULL."""
    if isinstance(expr, BinOp) and expr.op in "+-" and has_map(expr):
        right = terms(expr.right)
        if expr.op == "-":
            right = [(-s, f) for s, f in right]
        return terms(expr.left) + right
    if isinstance(expr, Neg) and has_map(expr):
        return [(-s, f) for s, f in terms(expr.operand)]
    return [(1, factors(expr))]


def loop_order(factors: list[Expr], params: set[str]) -> list[int]:
    """The map factors of a term that have loop variables (arguments the trigger does not
    bind), in the order they are best joined: next, always the one with the most
    arguments bound so far (by the trigger or the loops before it), then the fewest
    free; ties in the term's order. Every factor is then probed by what is bound, and
    a map sharing a loop variable with an earlier one is probed by its value."""
    pending = [n for n, f in enumerate(factors)
               if isinstance(f, MapRef) and any(isinstance(a, Var) and a.name not in params for a in f.args)]
    bound, order = set(params), []
    while pending:
        def score(n: int) -> tuple[int, int, int]:
            args = factors[n].args  # type: ignore[attr-defined]
            free = sum(1 for a in args if isinstance(a, Var) and a.name not in bound)
            return (-(len(args) - free), free, n)
        best = min(pending, key=score)
        pending.remove(best)
        order.append(best)
        bound.update(a.name for a in factors[best].args if isinstance(a, Var))  # type: ignore[attr-defined]
    return order


def has_map(expr: Expr) -> bool:
    return any(isinstance(e, MapRef) for e in expr.walk())


def factors(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinOp) and expr.op == "*":
        return factors(expr.left) + factors(expr.right)
    return [expr]


def product(items: list[Expr]) -> Expr:
    """The product of expressions, `1` for none."""
    if not items:
        return Const(1, "int")
    out = items[0]
    for item in items[1:]:
        out = BinOp("*", out, item)
    return out


def negate_program_trigger(trigger: Trigger) -> Trigger:
    """The deletion trigger derived from an insertion trigger: every statement times -1.
    Exact for triggers linear in their relation (no self-join of the event's relation);
    the SQL compiler writes both triggers itself."""
    stmts = tuple(Statement(s.target, Neg(s.expr), s.pos) for s in trigger.statements)
    return Trigger("-", trigger.relation, trigger.params, stmts, trigger.pos)
