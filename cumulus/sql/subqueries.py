"""Subqueries the front end maintains as views of their own (cumulus/sql/frontend.py, a
mixin of its binder): uncorrelated scalar subqueries in SELECT, HAVING and ORDER BY. Each
is bound as a view (`BoundView.subviews`), compiled beside the view (its maps shared like
any other) and read at read time: one value (cumulus/sql/readtime.py: SubValue).
Correlated ones are refused here; a subquery of WHERE becomes a derived relation
(cumulus/sql/nested.py)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from cumulus.sql.rewrite import inside


def read_time_subqueries(select: exp.Select) -> list[exp.Subquery]:
    """Subqueries answered at read time from views of their own: scalar subqueries in the
    SELECT list, HAVING and ORDER BY."""
    out: list[exp.Subquery] = []
    scopes = list(select.expressions) + [select.args[k] for k in ("having", "order") if select.args.get(k)]
    for scope in scopes:
        for node in scope.walk():
            if isinstance(node, exp.Subquery) and not any(inside(node, o) for o in out):
                out.append(node)
    return out


class SubqueryBinder:
    """Uses the binder's schema, sql, name, dialect, tokens, subviews, refuse, text_of
    and bind."""

    def bind_subview(self, sub: exp.Subquery) -> str:
        """An uncorrelated scalar subquery bound as a view of its own, maintained beside
        this one and read at read time (one value); its name."""
        inner = sub.this
        what = "a scalar subquery"
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
            raise self.refuse(f"{what} must be one SELECT of one column ({self.text_of(sub)})", sub, "SELECT")
        tables = [inner.args["from"].this] if inner.args.get("from") else []
        tables += [j.this for j in inner.args.get("joins") or []]
        aliases = {(t.alias_or_name or "").lower() for t in tables if isinstance(t, exp.Table)}
        columns = {c for t in tables if isinstance(t, exp.Table) and t.name.lower() in self.schema
                   for c in self.schema.relation(t.name.lower()).column_names}
        for col in inner.find_all(exp.Column):
            if (col.table and col.table.lower() not in aliases) or (not col.table and col.name.lower() not in columns):
                raise self.refuse(
                    f"correlated subqueries are not supported: {self.text_of(col)} refers to the outer query "
                    f"({self.text_of(sub)})", col)
        name = f"{self.stem}__sub{len(self.subviews) + 1}"
        bound = self.child(name).bind(inner)
        f = bound.finish
        if f is not None and (f.order or f.limit is not None or f.offset):
            raise self.refuse(f"ORDER BY, LIMIT or OFFSET in {what} is not supported ({self.text_of(sub)})", sub, "SELECT")
        if bound.group:
            raise self.refuse(f"a scalar subquery must not have GROUP BY: it gives one row ({self.text_of(sub)})", sub, "SELECT")
        self.subviews.append((name, replace(bound, name=name)))
        return name
