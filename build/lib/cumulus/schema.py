"""Base relations from SQL DDL: the first step of the pipeline. `CREATE TABLE` statements
become immutable `Relation` values with typed columns that every later step binds to."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from cumulus.errors import Position, SchemaError

# Cumulus's scalar types. Numeric ones are ordered by promotion: int < decimal < float.
INT, DECIMAL, FLOAT, STRING, DATE, BOOL = "int", "decimal", "float", "string", "date", "bool"
NUMERIC = (INT, DECIMAL, FLOAT)
NULL = "null"  # the type of the NULL constant: fits any other type
# Decimal map values are DECIMAL(38, DECIMAL_SCALE). Spark keeps at least 6 digits of
# scale when a product outgrows 38 digits, so values whose exact scale is at most 6 (sums
# of products of up to three DECIMAL(p,2) columns, as in TPC-H) stay exact; the compiler
# refuses a sum of decimals with more digits after the point.
DECIMAL_SCALE = 6

_SQL_TYPES = {
    exp.DataType.Type.TINYINT: INT,
    exp.DataType.Type.SMALLINT: INT,
    exp.DataType.Type.INT: INT,
    exp.DataType.Type.BIGINT: INT,
    exp.DataType.Type.DECIMAL: DECIMAL,
    exp.DataType.Type.FLOAT: FLOAT,
    exp.DataType.Type.DOUBLE: FLOAT,
    exp.DataType.Type.VARCHAR: STRING,
    exp.DataType.Type.CHAR: STRING,
    exp.DataType.Type.TEXT: STRING,
    exp.DataType.Type.DATE: DATE,
    exp.DataType.Type.BOOLEAN: BOOL,
}


def promote(a: str, b: str) -> str:
    """The type of an arithmetic result over two numeric types."""
    return NUMERIC[max(NUMERIC.index(a), NUMERIC.index(b))]


def parse_value(text: str, type_: str):
    """Parse one field's text as a value of `type_`; raises ValueError with the reason."""
    if type_ == INT:
        return int(text)
    if type_ == DECIMAL:
        try:
            value = Decimal(text)
        except InvalidOperation:
            raise ValueError(f"not a decimal number: {text!r}") from None
        if not value.is_finite():
            raise ValueError(f"not a finite decimal number: {text!r}")
        return value
    if type_ == FLOAT:
        return float(text)
    if type_ == DATE:
        return dt.date.fromisoformat(text)
    if type_ == BOOL:
        lowered = text.strip().lower()
        if lowered in ("true", "t", "1"):
            return True
        if lowered in ("false", "f", "0"):
            return False
        raise ValueError(f"not a boolean: {text!r}")
    return text


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    precision: int | None = None  # DECIMAL(precision, scale)
    scale: int | None = None

    @property
    def sql_type(self) -> str:
        """The column's type as SQL (Spark and DuckDB both accept it)."""
        if self.type == DECIMAL:
            return f"DECIMAL({self.precision or 38},{self.scale if self.scale is not None else 10})"
        return {INT: "BIGINT", FLOAT: "DOUBLE", STRING: "STRING", DATE: "DATE", BOOL: "BOOLEAN"}[
            self.type
        ]


@dataclass(frozen=True)
class Relation:
    name: str
    columns: tuple[Column, ...]
    # A derived relation: the rows of a nested query (a subquery in FROM with GROUP BY, a
    # correlated subquery decorrelated by its keys), maintained as a view of its own and
    # fed to the views over it as change events (cumulus/sql/nested.py). Not a table.
    derived: bool = False

    @property
    def arity(self) -> int:
        return len(self.columns)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name.lower():
                return c
        raise SchemaError(f"relation {self.name!r} has no column {name!r}")


@dataclass(frozen=True)
class Schema:
    relations: tuple[Relation, ...]

    def __contains__(self, name: str) -> bool:
        return any(r.name == name.lower() for r in self.relations)

    def relation(self, name: str) -> Relation:
        for r in self.relations:
            if r.name == name.lower():
                return r
        known = ", ".join(r.name for r in self.relations) or "none"
        raise SchemaError(f"unknown relation {name!r} (the schema declares: {known})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.relations)

    @property
    def base(self) -> tuple[Relation, ...]:
        """The relations events arrive for (those with tables): every one not derived."""
        return tuple(r for r in self.relations if not r.derived)

    def with_relation(self, relation: Relation) -> Schema:
        return Schema(self.relations + (relation,))


def _column(defn: exp.ColumnDef, relation: str, text: str) -> Column:
    name = defn.name.lower()
    kind = defn.args.get("kind")
    if kind is None:
        raise SchemaError(f"column {relation}.{name} has no type")
    type_ = _SQL_TYPES.get(kind.this)
    if type_ is None:
        raise SchemaError(
            f"unsupported type {kind.sql()} for column {relation}.{name} "
            "(use INT, BIGINT, DECIMAL(p,s), DOUBLE, VARCHAR, DATE or BOOLEAN)"
        )
    precision = scale = None
    if type_ == DECIMAL:
        params = [int(p.name) for p in kind.expressions]
        precision = params[0] if params else 38
        scale = params[1] if len(params) > 1 else 0
    nullable = not any(
        isinstance(c.args.get("kind"), exp.NotNullColumnConstraint)
        and not c.args["kind"].args.get("allow_null")
        or isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint)
        for c in defn.args.get("constraints") or []
    )
    return Column(name, type_, nullable, precision, scale)


def parse_schema(text: str, source: str = "") -> Schema:
    """Read every `CREATE TABLE` of a DDL text; other statements are refused."""
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        pos = Position(err.get("line", 1), err.get("col", 1), source) if err else None
        raise SchemaError(f"cannot parse the DDL: {err.get('description', exc)}", pos) from None
    relations: list[Relation] = []
    for stmt in statements:
        if stmt is None:
            continue
        if not isinstance(stmt, exp.Create) or stmt.kind != "TABLE":
            raise SchemaError(f"only CREATE TABLE statements are allowed in a schema, got: {stmt.sql()[:60]}")
        table = stmt.this.this if isinstance(stmt.this, exp.Schema) else stmt.this
        name = table.name.lower()
        if any(r.name == name for r in relations):
            raise SchemaError(f"relation {name!r} is declared twice")
        defs = [d for d in stmt.this.expressions if isinstance(d, exp.ColumnDef)]
        if not defs:
            raise SchemaError(f"relation {name!r} declares no columns")
        columns = tuple(_column(d, name, text) for d in defs)
        seen = set()
        for c in columns:
            if c.name in seen:
                raise SchemaError(f"column {name}.{c.name} is declared twice")
            seen.add(c.name)
        relations.append(Relation(name, columns))
    if not relations:
        raise SchemaError(f"no CREATE TABLE statement found{' in ' + source if source else ''}")
    return Schema(tuple(relations))


def load_schema(path: str | Path) -> Schema:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SchemaError(f"cannot read the schema file {path}: {exc.strerror}") from None
    return parse_schema(text, source=str(path))
