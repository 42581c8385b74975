"""The base relations as SQL sees them: base.<rel> (appended layers of net counts) as a
temporary view per relation whose rows are its live tuples, each `mult` times, and a
view's SQL rewritten to read those views. What the oracle recomputes views with
(cumulus/quality/oracle.py) and what a view kept by full refresh is computed from
(cumulus/engine/refresh.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from cumulus.config import DEFAULT_DIALECT
from cumulus.schema import Relation, Schema
from cumulus.store.fold import base_rows
from cumulus.store.tables import Home, tag_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def temp_view_name(relation: str, epoch: int) -> str:
    return f"cumulus_oracle_e{epoch}_{relation}"


def register_expanded_base(
    home: Home, relations: Schema | Iterable[Relation], epoch: int,
    *, at_tag: bool = True,
) -> list[str]:
    """A temporary view per relation (every relation of a Schema, or the ones given):
    base.<rel> at the tag (or on the main branch: `at_tag=False`, for a caller that knows
    nothing was folded since epoch N closed), expanded (below). Returns the views' names,
    to drop afterwards."""
    names = []
    for rel in relations.base if isinstance(relations, Schema) else relations:
        name = temp_view_name(rel.name, epoch)
        tag = tag_name(epoch) if at_tag else None
        rows = base_rows(home.spark, home.tables.base(rel.name), list(rel.column_names), tag)
        expand(rows, rel.column_names).createOrReplaceTempView(name)
        names.append(name)
    return names


def expand(multiset: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of a multiset frame (`columns` and `mult`), each repeated `mult` times
    (none when mult <= 0): the relation as SQL sees it."""
    from pyspark.sql import functions as F

    copies = F.explode(F.array_repeat(F.lit(1), F.col("mult").cast("int")))
    return multiset.select(*[F.col(f"`{c}`") for c in columns], copies.alias("__copy")).drop("__copy")


def spark_sql(view_sql: str, schema: Schema, epoch: int, dialect: str = DEFAULT_DIALECT, unlimited: bool = False) -> str:
    """The view's SQL (written in `dialect`) for Spark, its relations replaced by the
    expanded temporary views (keeping the names as aliases), AVG(e) as
    CAST(SUM(e) AS DOUBLE) / COUNT(e) and a / b as CAST(a AS DOUBLE) / CAST(b AS DOUBLE);
    `unlimited`: without its LIMIT and OFFSET."""
    import sqlglot
    from sqlglot import exp

    relations = {r.name.lower() for r in schema.base}
    tree = sqlglot.parse_one(view_sql, read=dialect)
    if unlimited:
        tree.set("limit", None)
        tree.set("offset", None)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.name.lower() in relations and not node.args.get("db"):
            # Only the name changes: an alias's column list (r AS x(b, a)), TABLESAMPLE,
            # PIVOT and the rest stay as the view has them.
            table = node.copy()
            table.set("this", exp.to_identifier(temp_view_name(node.name.lower(), epoch)))
            if not node.alias:
                table.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
            return table
        if isinstance(node, exp.Window) and isinstance(node.this, exp.Avg):  # AVG(e) OVER w: each part over w
            arg = node.this.this
            total, count = node.copy(), node.copy()
            total.set("this", exp.Sum(this=arg.copy()))
            count.set("this", exp.Count(this=arg.copy()))
            return exp.Div(this=exp.Cast(this=total, to=exp.DataType.build("double")), expression=count)
        if isinstance(node, exp.Avg):
            arg = node.this
            total = exp.Cast(this=exp.Sum(this=arg.copy()), to=exp.DataType.build("double"))
            return exp.Div(this=total, expression=exp.Count(this=arg.copy()))
        if isinstance(node, exp.Div) and not all(isinstance(x, exp.Cast) for x in (node.this, node.expression)):
            # A quotient is a double in the views' semantics (docs/compiler.md), as in
            # DuckDB; Spark's quotient of decimals would round to 6 digits.
            return exp.Div(this=exp.Cast(this=node.this.copy(), to=exp.DataType.build("double")),
                           expression=exp.Cast(this=node.expression.copy(), to=exp.DataType.build("double")))
        return node

    return tree.transform(rewrite).sql(dialect="spark")
