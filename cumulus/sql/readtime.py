"""The read-time layer of a view: what is computed from its maintained columns (group
keys and aggregates, cumulus/sql/views.py) when it is read, never maintained. The front
end binds the SELECT list, HAVING, ORDER BY, LIMIT and OFFSET into a `Finish`; every
reader applies it: `apply` in Python (view_rows: the read API, the CLI, the interpreter)
and `to_sql` in Spark SQL (cumulus/sql/mapsql.py: the catalog views, dbt staging).

Semantics are DuckDB's (the tests' oracle): NULL in, NULL out; comparisons are
three-valued and HAVING keeps the rows where it is true; `+ - *` keep integers integers
and decimals exact (Python Decimal without rounding; Spark SQL with casts that keep every
digit); `/` divides as doubles and, as DuckDB does, gives +inf, -inf or NaN for a zero
divisor. ORDER BY keys take their NULLS FIRST/LAST from the view's dialect (sqlglot
makes it explicit); rows equal on every key are ordered by the group key (NULLs first) in
Python and Spark alike, so LIMIT cuts at the same row in every reader."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from cumulus.errors import Position, SQLBindError, UnsupportedSQLError
from cumulus.m3.ast import Const
from cumulus.m3.interpreter import EXACT, compare_values, divide, nan_last
from cumulus.output import text as show
from cumulus.sql.sqltext import LITERAL_SPELLING, literal_as, quotient_sql, spark_literal

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class RExpr:
    def children(self) -> tuple[RExpr, ...]:
        return ()


@dataclass(frozen=True)
class Ref(RExpr):
    """A maintained column of the view (a group key or an aggregate), by name."""

    name: str


@dataclass(frozen=True)
class Lit(RExpr):
    value: object
    type: str  # cumulus.schema type names


@dataclass(frozen=True)
class Arith(RExpr):
    op: str  # + - * /
    left: RExpr
    right: RExpr
    at: Position | None = field(default=None, compare=False)  # where the view has it, for errors
    text: str = field(default="", compare=False)

    def children(self) -> tuple[RExpr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Minus(RExpr):
    operand: RExpr
    at: Position | None = field(default=None, compare=False)  # where the view has it, for errors
    text: str = field(default="", compare=False)

    def children(self) -> tuple[RExpr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class ToDouble(RExpr):
    """CAST(x AS DOUBLE)."""

    operand: RExpr
    at: Position | None = field(default=None, compare=False)  # where the view has it, for errors
    text: str = field(default="", compare=False)

    def children(self) -> tuple[RExpr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class SubValue(RExpr):
    """An uncorrelated scalar subquery: the one value of a view maintained for it (NULL
    when it has no row)."""

    view: str


def view_key(view: str) -> str:
    """The key under which a row carries a subquery view's values (a tuple)."""
    return f"__view:{view}"


@dataclass(frozen=True)
class Compare(RExpr):
    op: str  # = <> < <= > >=
    left: RExpr
    right: RExpr
    at: Position | None = field(default=None, compare=False)  # where the view has it, for errors
    text: str = field(default="", compare=False)

    def children(self) -> tuple[RExpr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Logic(RExpr):
    op: str  # AND, OR
    left: RExpr
    right: RExpr

    def children(self) -> tuple[RExpr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Negation(RExpr):
    operand: RExpr

    def children(self) -> tuple[RExpr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class NullTest(RExpr):
    operand: RExpr
    negated: bool = False

    def children(self) -> tuple[RExpr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Case(RExpr):
    whens: tuple[tuple[RExpr, RExpr], ...]
    default: RExpr
    at: Position | None = field(default=None, compare=False)  # where the view has it, for errors
    text: str = field(default="", compare=False)

    def children(self) -> tuple[RExpr, ...]:
        return tuple(x for w in self.whens for x in w) + (self.default,)


@dataclass(frozen=True)
class Order:
    expr: RExpr
    desc: bool = False
    nulls_first: bool = False


@dataclass(frozen=True)
class Finish:
    """The SELECT list (name, expression over maintained columns), HAVING, ORDER BY,
    LIMIT and OFFSET of a view."""

    select: tuple[tuple[str, RExpr], ...]
    having: RExpr | None = None
    order: tuple[Order, ...] = ()
    limit: int | None = None
    offset: int | None = None

    def trivial(self, visible: Sequence[str]) -> bool:
        """Nothing to do at read time but to show the columns `visible`, in order."""
        return (
            self.having is None and not self.order and self.limit is None and self.offset is None
            and tuple(e for _, e in self.select) == tuple(Ref(n) for n in visible)
        )

    @property
    def computed(self) -> tuple[str, ...]:
        """The SELECT items that are expressions (not a maintained column as it is)."""
        return tuple(n for n, e in self.select if not isinstance(e, Ref))


def refs(e: RExpr) -> list[str]:
    out = [e.name] if isinstance(e, Ref) else []
    for c in e.children():
        out.extend(refs(c))
    return out


# ---------------------------------------------------------------- Python evaluation



def evaluate(e: RExpr, row: dict[str, object]):
    if isinstance(e, Ref):
        return row[e.name]
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Arith):
        return arith(e.op, evaluate(e.left, row), evaluate(e.right, row))
    if isinstance(e, Minus):
        v = evaluate(e.operand, row)
        return None if v is None else -v
    if isinstance(e, ToDouble):
        v = evaluate(e.operand, row)
        return None if v is None else float(v)  # type: ignore[arg-type]
    if isinstance(e, SubValue):
        values = row[view_key(e.view)]
        return values[0] if values else None  # type: ignore[index]
    if isinstance(e, Compare):
        return compare(e.op, evaluate(e.left, row), evaluate(e.right, row))
    if isinstance(e, Logic):
        a, b = evaluate(e.left, row), evaluate(e.right, row)
        if e.op == "AND":
            return False if a is False or b is False else (None if a is None or b is None else True)
        return True if a is True or b is True else (None if a is None or b is None else False)
    if isinstance(e, Negation):
        v = evaluate(e.operand, row)
        return None if v is None else not v
    if isinstance(e, NullTest):
        return (evaluate(e.operand, row) is None) != e.negated
    if isinstance(e, Case):
        for cond, value in e.whens:
            if evaluate(cond, row) is True:
                return evaluate(value, row)
        return evaluate(e.default, row)
    raise TypeError(f"cannot evaluate {e!r}")


def arith(op: str, a, b):
    if a is None or b is None:
        return None
    if op == "/":
        return divide(a, b)
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
    elif isinstance(a, Decimal) or isinstance(b, Decimal):
        a, b = Decimal(a), Decimal(b)
        return {"+": EXACT.add, "-": EXACT.subtract, "*": EXACT.multiply}[op](a, b)
    return a + b if op == "+" else a - b if op == "-" else a * b


def compare(op: str, a, b) -> bool | None:
    if a is None or b is None:
        return None
    return compare_values(op, a, b)


def apply(finish: Finish, rows: list[dict[str, object]], group: Sequence[str]) -> list[tuple]:
    """The view's rows (SELECT order) from its maintained rows (dicts by column name)."""
    if finish.having is not None:
        rows = [r for r in rows if evaluate(finish.having, r) is True]
    rows = ranked(finish.order, rows, group)
    start = finish.offset or 0
    stop = None if finish.limit is None else start + finish.limit
    rows = rows[start:stop]
    return [tuple(evaluate(e, r) for _, e in finish.select) for r in rows]


def ranked(order: Sequence[Order], rows: list[dict[str, object]], group: Sequence[str]) -> list[dict[str, object]]:
    """`rows` in a view's order: by `order`, ties broken by the group columns `group`
    (ascending, NULLs first), as the view's SQL sorts them (mapsql's finish_lines). The
    sort is stable: rows equal on every key keep their order."""
    rows = sorted(rows, key=lambda r: tuple((0,) if r[g] is None else (1, nan_last(r[g])) for g in group))
    for o in reversed(order):
        values = [(evaluate(o.expr, r), r) for r in rows]
        # With reverse=True the largest key comes first: NULLs come first when they are the
        # least key in an ascending sort or the greatest in a descending one.
        null_low = o.nulls_first != o.desc
        values.sort(
            key=lambda vr: ((0,) if null_low else (2,)) if vr[0] is None else (1, nan_last(vr[0])),
            reverse=o.desc,
        )
        rows = [r for _, r in values]
    return rows


# ---------------------------------------------------------------- types

NUMERIC = ("int", "decimal", "float")


def type_of(e: RExpr, types: dict[str, str]) -> str:
    """The type of an expression (cumulus.schema names; DuckDB's result types)."""
    if isinstance(e, Ref):
        return types[e.name]
    if isinstance(e, Lit):
        return e.type
    if isinstance(e, Arith):
        if e.op == "/":
            return "float"
        a, b = type_of(e.left, types), type_of(e.right, types)
        for t in ("float", "decimal", "int"):
            if t in (a, b):
                return t
        return a
    if isinstance(e, Minus):
        return type_of(e.operand, types)
    if isinstance(e, ToDouble):
        return "float"
    if isinstance(e, SubValue):
        return types[view_key(e.view)]
    if isinstance(e, Case):
        found = [type_of(v, types) for _, v in e.whens] + [type_of(e.default, types)]
        known = [t for t in found if t != "null"]
        for t in ("float", "decimal", "int"):
            if t in known:
                return t
        return known[0] if known else "null"
    return "bool"


def typed(finish: Finish, types: dict[str, str], sql: str) -> Finish:
    """`finish` with its comparisons type-checked as the front end checks the WHERE
    clause's: a string constant compared with a DATE or an INT is read as one
    (sqltext.literal_as; HAVING MAX(dt) > '1998-09-02'); other mixed types, and a
    spelling the engines could read differently, are a SQLBindError at the comparison."""
    def fix(e):
        if isinstance(e, tuple):
            return tuple(fix(x) for x in e)
        if not isinstance(e, RExpr) or not e.children():
            return e
        e = replace(e, **{f: fix(getattr(e, f)) for f in e.__dataclass_fields__
                          if isinstance(getattr(e, f), (RExpr, tuple))})
        if isinstance(e, Compare):
            lt, rt = type_of(e.left, types), type_of(e.right, types)
            e = replace(e, left=_literal(e.left, rt, e, sql), right=_literal(e.right, lt, e, sql))
            lt, rt = type_of(e.left, types), type_of(e.right, types)
            if lt != rt and "null" not in (lt, rt) and not (lt in NUMERIC and rt in NUMERIC):
                raise SQLBindError(f"cannot compare {lt.upper()} with {rt.upper()} in {e.text}", e.at, sql)
            if "bool" in (lt, rt) and e.op not in ("=", "<>"):
                raise SQLBindError(f"booleans can only be compared with = and <> ({e.text})", e.at, sql)
        if isinstance(e, (Arith, Minus, ToDouble)):
            found = [type_of(x, types) for x in e.children()]
            if any(t not in NUMERIC and t != "null" for t in found):
                # DATE - DATE is an INT in DuckDB and an interval in Spark, MAX(s) + 1 an
                # error in one and NULL in the other: what the engines agree on is numbers
                raise UnsupportedSQLError(f"{e.text or text(e)}: arithmetic over aggregates of "
                                          f"{' and '.join(t.upper() for t in found)} is not supported at read time "
                                          "(numbers are)", e.at, sql)
        if isinstance(e, Case):
            found = {t for t in (type_of(v, types) for _, v in e.whens) if t != "null"} | \
                ({type_of(e.default, types)} - {"null"})
            if len(found) > 1 and not found <= set(NUMERIC):
                raise UnsupportedSQLError(f"{e.text or text(e)}: its values are of the types "
                                          f"{', '.join(sorted(t.upper() for t in found))} (the engines convert them "
                                          "differently): cast them to one", e.at, sql)
        return e

    return replace(finish, select=tuple((n, fix(x)) for n, x in finish.select), having=fix(finish.having),
                   order=tuple(replace(o, expr=fix(o.expr)) for o in finish.order))


def _literal(e: RExpr, other: str, at: Compare, sql: str) -> RExpr:
    if not (isinstance(e, Lit) and e.type == "string" and other in ("date", "int")):
        return e
    value = literal_as(e.value, other)  # type: ignore[arg-type]
    if value is None:
        raise SQLBindError(f"cannot compare {other.upper()} with the string '{e.value}' in {at.text}: "
                           f"{LITERAL_SPELLING[other]}", at.at, sql)
    return Lit(value, other)


# ---------------------------------------------------------------- Spark SQL

_SPARK_MAX = 38


@dataclass(frozen=True)
class _Sql:
    text: str
    type: str
    precision: int = 0  # decimals: Spark's DECIMAL(precision, scale) of the text
    scale: int = 0
    literal: bool = False


def to_sql(e: RExpr, ref: Callable[[str], str], types: dict[str, str]) -> str:
    """Spark SQL for `e`; `ref(name)` is the SQL of a maintained column (decimals there are
    DECIMAL(38,6), the maps' value type). Casts keep decimal results exact: Spark would
    round a product's or sum's scale down to 6 digits where its precision passes 38."""
    return _sql(e, ref, types).text


def _decimal_literal(v: Decimal) -> tuple[int, int]:
    sign, digits, exponent = v.as_tuple()
    scale = max(0, -int(exponent))
    return max(len(digits), scale + 1), scale


def _sql(e: RExpr, ref, types) -> _Sql:
    if isinstance(e, Ref):
        t = types[e.name]
        return _Sql(ref(e.name), t, _SPARK_MAX, 6) if t == "decimal" else _Sql(ref(e.name), t)
    if isinstance(e, Lit):
        if e.value is None:
            return _Sql("NULL", "null", literal=True)
        text = spark_literal(Const(e.value, e.type))
        if e.type == "decimal":
            p, s = _decimal_literal(Decimal(e.value))  # type: ignore[arg-type]
            return _Sql(text, "decimal", p, s, literal=True)
        if e.type == "int":
            return _Sql(text, "int", len(str(abs(int(e.value)))), 0, literal=True)  # type: ignore[call-overload]
        return _Sql(text, e.type, literal=True)
    if isinstance(e, Minus):
        inner = _sql(e.operand, ref, types)
        return _Sql(f"(-{inner.text})", inner.type, inner.precision, inner.scale)
    if isinstance(e, ToDouble):
        return _Sql(f"CAST({_sql(e.operand, ref, types).text} AS DOUBLE)", "float")
    if isinstance(e, SubValue):  # ref names the subquery view's CTE (one column, at most one row)
        t = types[view_key(e.view)]
        return _Sql(f"(SELECT * FROM {ref(view_key(e.view))})", t, _SPARK_MAX if t == "decimal" else 0, 6 if t == "decimal" else 0)
    if isinstance(e, Arith):
        a, b = _sql(e.left, ref, types), _sql(e.right, ref, types)
        if e.op == "/":
            return _Sql(quotient_sql(a.text, b.text), "float")
        t = type_of(e, types)
        if t != "decimal":
            if t == "float":
                return _Sql(f"(CAST({a.text} AS DOUBLE) {e.op} CAST({b.text} AS DOUBLE))", "float")
            return _Sql(f"({a.text} {e.op} {b.text})", t)
        a, b = _as_decimal(a), _as_decimal(b)
        if e.op == "*":
            scale = a.scale + b.scale
            if a.literal or b.literal:  # the other operand's integer digits make room for the literal's
                lit, other = (a, b) if a.literal else (b, a)
                room = _SPARK_MAX - lit.precision - 1
                other = _cast(other, room, other.scale)
                return _Sql(f"({lit.text} * {other.text})", "decimal", _SPARK_MAX, scale)
            raise TypeError("a product of two decimal aggregates (the front end refuses it)")
        scale = max(a.scale, b.scale)
        a, b = _cast(a, _SPARK_MAX - 1, scale), _cast(b, _SPARK_MAX - 1, scale)
        return _Sql(f"({a.text} {e.op} {b.text})", "decimal", _SPARK_MAX, scale)
    if isinstance(e, Compare):
        a, b = _sql(e.left, ref, types), _sql(e.right, ref, types)
        return _Sql(f"({a.text} {e.op} {b.text})", "bool")
    if isinstance(e, Logic):
        a, b = _sql(e.left, ref, types), _sql(e.right, ref, types)
        return _Sql(f"({a.text} {e.op} {b.text})", "bool")
    if isinstance(e, Negation):
        return _Sql(f"(NOT {_sql(e.operand, ref, types).text})", "bool")
    if isinstance(e, NullTest):
        return _Sql(f"({_sql(e.operand, ref, types).text} IS {'NOT ' if e.negated else ''}NULL)", "bool")
    if isinstance(e, Case):
        t = type_of(e, types)
        parts = []
        for cond, value in e.whens:
            parts.append(f"WHEN {_sql(cond, ref, types).text} THEN {_typed(_sql(value, ref, types), t)}")
        return _Sql(f"(CASE {' '.join(parts)} ELSE {_typed(_sql(e.default, ref, types), t)} END)", t,
                    _SPARK_MAX if t == "decimal" else 0, 6 if t == "decimal" else 0)
    raise TypeError(f"no SQL for {e!r}")


def _as_decimal(x: _Sql) -> _Sql:
    if x.type == "decimal":
        return x
    if x.literal and x.type == "int":
        return _Sql(f"CAST({x.text} AS DECIMAL({x.precision},0))", "decimal", x.precision, 0, literal=True)
    return _Sql(f"CAST({x.text} AS DECIMAL(20,0))", "decimal", 20, 0)


def _cast(x: _Sql, precision: int, scale: int) -> _Sql:
    if (x.precision, x.scale) == (precision, scale):
        return x
    return _Sql(f"CAST({x.text} AS DECIMAL({precision},{scale}))", "decimal", precision, scale, x.literal)


def _typed(x: _Sql, t: str) -> str:
    if t == "float" and x.type != "float":
        return f"CAST({x.text} AS DOUBLE)"
    if t == "decimal" and x.type != "decimal":
        return f"CAST({x.text} AS DECIMAL(38,6))"
    if t == "decimal":
        return _cast(x, _SPARK_MAX, 6).text if x.scale <= 6 else x.text
    return x.text


def order_sql(o: Order, ref, types) -> str:
    return f"{_sql(o.expr, ref, types).text} {'DESC' if o.desc else 'ASC'} NULLS {'FIRST' if o.nulls_first else 'LAST'}"


# ---------------------------------------------------------------- text, for explain

def text(e: RExpr) -> str:
    """An expression as SQL for people (explain)."""
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Lit):
        return "NULL" if e.value is None else (f"'{e.value}'" if e.type in ("string",) else
                                               f"DATE '{show(e.value)}'" if e.type == "date" else show(e.value))
    if isinstance(e, Arith):
        return f"({text(e.left)} {e.op} {text(e.right)})"
    if isinstance(e, Minus):
        return f"-{text(e.operand)}"
    if isinstance(e, ToDouble):
        return f"CAST({text(e.operand)} AS DOUBLE)"
    if isinstance(e, SubValue):
        return f"(the value of view {e.view})"
    if isinstance(e, (Compare, Logic)):
        return f"({text(e.left)} {e.op} {text(e.right)})"
    if isinstance(e, Negation):
        return f"NOT ({text(e.operand)})"
    if isinstance(e, NullTest):
        return f"{text(e.operand)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, Case):
        whens = " ".join(f"WHEN {text(c)} THEN {text(v)}" for c, v in e.whens)
        return f"CASE {whens} ELSE {text(e.default)} END"
    raise TypeError(f"no text for {e!r}")
