"""The clauses the compiler models, by name: every other clause of a view's sqlglot tree
is refused with the construct it stands for (so `view add` keeps the view by full
refresh), never dropped. sqlglot parses many dialects' clauses into the same nodes
(TABLESAMPLE, FOR VERSION AS OF, LATERAL VIEW, PIVOT, GROUP BY ... WITH ROLLUP, SORT BY,
...); a binder that reads the arguments it knows and ignores the rest would maintain a
different query than the one Spark runs. So each node kind below lists the arguments
the binder reads, and `unmodelled` yields each other argument set on any node of the
tree, subqueries and CTEs included.

GROUP BY ALL (Spark 3.4+, DuckDB) is modelled by rewriting it (`expand_group_by_all`)
into the list it stands for."""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

# What the binder reads of each node kind (cumulus/sql/frontend.py, items.py, nested.py).
# Select: `distinct`, `qualify` and `windows` are read to be refused or checked there
# (DISTINCT is rewritten into GROUP BY; a WINDOW clause names windows only OVER uses, and
# OVER is refused); `hint`s change plans, not rows; DISTRIBUTE BY places rows, no more.
MODELLED: dict[type[exp.Expression], frozenset[str]] = {
    exp.Select: frozenset({"expressions", "from", "joins", "where", "group", "having", "order", "limit", "offset",
                           "distinct", "with", "qualify", "windows", "hint", "distribute"}),
    exp.Union: frozenset({"this", "expression", "distinct", "with", "order", "limit", "offset"}),
    exp.Subquery: frozenset({"this", "alias"}),
    exp.Table: frozenset({"this", "db", "catalog", "alias", "hints"}),
    exp.Join: frozenset({"this", "kind", "side", "on", "using", "method", "hint"}),
    exp.Group: frozenset({"expressions"}),
    exp.With: frozenset({"expressions"}),
    exp.CTE: frozenset({"this", "alias"}),
    exp.Order: frozenset({"this", "expressions"}),  # `this`: MIN(x ORDER BY y), which binding refuses
    exp.Ordered: frozenset({"this", "desc", "nulls_first"}),
    exp.Limit: frozenset({"this", "expression"}),
    exp.Distinct: frozenset({"expressions"}),  # COUNT(DISTINCT a, b)
    # Expressions whose other arguments change their value (BETWEEN SYMMETRIC, an Oracle
    # outer-join mark, CAST ... FORMAT, IN UNNEST): the binder reads these only.
    exp.Between: frozenset({"this", "low", "high"}),
    exp.Column: frozenset({"this", "table", "db", "catalog"}),
    exp.Cast: frozenset({"this", "to"}),
    exp.In: frozenset({"this", "expressions", "query"}),
    exp.Star: frozenset(),  # DuckDB's * EXCLUDE / REPLACE / RENAME: expand_stars reads none
    # An aggregate reads one argument: COUNT(a, b) counts the rows where both are non-NULL.
    exp.Count: frozenset({"this", "big_int"}),
    exp.Sum: frozenset({"this"}),
    exp.Avg: frozenset({"this"}),
    exp.Min: frozenset({"this"}),
    exp.Max: frozenset({"this"}),
}

# The construct behind an argument, and the keyword where the message points (the first
# of the |-separated spellings that the view's text has).
CONSTRUCTS: dict[str, tuple[str, str]] = {
    "sample": ("TABLESAMPLE", "TABLESAMPLE|SAMPLE"),
    "version": ("time travel (VERSION AS OF, TIMESTAMP AS OF)", "AS OF"),
    "laterals": ("LATERAL VIEW", "LATERAL"),
    "pivots": ("PIVOT and UNPIVOT", "PIVOT"),
    "rollup": ("GROUP BY ROLLUP (subtotals)", "ROLLUP"),
    "cube": ("GROUP BY CUBE (subtotals)", "CUBE"),
    "grouping_sets": ("GROUP BY GROUPING SETS", "GROUPING SETS"),
    "totals": ("GROUP BY ... WITH TOTALS", "TOTALS"),
    "sort": ("SORT BY (an order within each partition)", "SORT BY"),
    "cluster": ("CLUSTER BY (an order within each partition)", "CLUSTER BY"),
    "recursive": ("WITH RECURSIVE", "RECURSIVE"),
    "by_name": ("UNION BY NAME", "BY NAME"),
    "into": ("SELECT INTO", "INTO"),
    "connect": ("CONNECT BY", "CONNECT"),
    "match": ("MATCH_RECOGNIZE", "MATCH_RECOGNIZE"),
    "locks": ("FOR UPDATE / FOR SHARE", "FOR"),
    "prewhere": ("PREWHERE", "PREWHERE"),
    "limit_options": ("FETCH ... PERCENT or WITH TIES", "FETCH"),
    "with_fill": ("ORDER BY ... WITH FILL", "FILL"),
    "match_condition": ("ASOF JOIN", "ASOF"),
    "joins": ("a parenthesized join, FROM (a JOIN b ...),", "JOIN"),  # on a Table: write it without them
    "on": ("DISTINCT ON", "ON"),  # on a Distinct (a Join's ON is modelled)
    "symmetric": ("BETWEEN SYMMETRIC", "SYMMETRIC"),
    "join_mark": ("an outer-join mark (+)", "(+)"),
    "format": ("a FORMAT clause", "FORMAT"),
    "unnest": ("IN UNNEST", "UNNEST"),
    "field": ("IN over an expression, not a list (IN LIST (...), IN an array)", "IN"),
    "except": ("* EXCLUDE", "EXCLUDE|EXCEPT"),
    "replace": ("* REPLACE", "REPLACE"),
    "rename": ("* RENAME", "RENAME"),
}


def unmodelled(tree: exp.Expression) -> Iterator[tuple[str, exp.Expression, tuple[str, ...]]]:
    """Each argument set on a node of `tree` that the binder does not read: (message,
    the argument's node, the keyword's spellings to point at), in the tree's order."""
    for node in tree.walk():
        if isinstance(node, exp.Table) and node.args.get("alias") is not None and node.args["alias"].columns:
            # r AS x(b, a) renames r's columns (a subquery's or a CTE's column list is modelled)
            yield "column names in a relation's alias (r AS x(c, ...)) are not supported", node.args["alias"], ("AS",)
        allowed = next((args for kind, args in MODELLED.items() if type(node) is kind), None)
        if allowed is None:
            continue
        for key, value in node.args.items():
            if key in allowed or value is None or value is False or value == []:
                continue
            if key in ("sort", "cluster") and isinstance(node, exp.Select) and not (
                    node.args.get("limit") or node.args.get("offset")):
                continue  # without LIMIT, an order within partitions leaves the rows as they are
            what, keyword = CONSTRUCTS.get(key, (key.replace("_", " ").upper(), key.split("_")[0].upper()))
            if isinstance(node, exp.AggFunc) and key == "expressions":
                what, keyword = f"{node.key.upper()} of several arguments", node.key.upper()
            first = value[0] if isinstance(value, list) else value
            if isinstance(first, exp.Version):  # one token: VERSION AS OF, TIMESTAMP AS OF
                keyword = f"{first.name} {first.text('kind')}".upper()
            yield f"{what} is not supported", first if isinstance(first, exp.Expression) else node, tuple(keyword.split("|"))


def expand_group_by_all(tree: exp.Expression) -> str | None:
    """Every GROUP BY ALL of `tree` rewritten into the SELECT items without an aggregate
    (Spark's and DuckDB's meaning); a reason when one cannot be (a `*` or a subquery
    among the items), else None."""
    for select in list(tree.find_all(exp.Select)):
        group = select.args.get("group")
        if group is None or not group.args.get("all"):
            continue
        keys = []
        for item in select.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            aggregate = any(isinstance(n, exp.AggFunc) for n in node.walk())
            if isinstance(node, exp.Star) or any(isinstance(n, exp.Subquery) for n in node.walk()) or \
                    (not aggregate and any(isinstance(n, exp.Star) for n in node.walk())):
                return "GROUP BY ALL over a * or a subquery in the SELECT list is not supported; list the keys"
            if not aggregate:
                keys.append(node.copy())
        select.set("group", exp.Group(expressions=keys) if keys else None)
    return None
