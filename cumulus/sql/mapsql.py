"""A view as one Spark SQL query over its map tables: the SQL face of the view semantics
in cumulus/sql/views.py (view_rows), for readers that speak SQL (the Thrift server, dbt,
`cumulus view sql`), optionally at a closed epoch's tag (`VERSION AS OF 'epoch-N'`).

The query mirrors view_rows step by step, so its rows are exactly `Reader.read_view`'s:

    maps      every map the view reads: its rows of maps.entries (its key slots named as
              its keys, its value slot as `value`), summed per key
    groups    the group-count map's keys whose count is above zero (a view without GROUP
              BY has exactly one row, whatever its maps hold)
    columns   group columns from the group's key; COUNT(...) the count map's entry (0 when
              absent); SUM the sum map's entry (0 when absent), NULL when its non-NULL count
              (the group count when the summed expression is NOT NULL) is 0; AVG the same
              sum as a DOUBLE divided by that count; MIN/MAX the least/greatest value of the
              value-count map whose count is above zero (NULL when there is none)
    finish    a view with read-time work (expressions over aggregates, HAVING, ORDER BY,
              LIMIT, OFFSET: cumulus/sql/readtime.py) selects the above, hidden columns and
              group keys included, as `base` and applies it there

Map keys are matched to view variables by position (a shared map keeps the column names
of the view that created it) and compared with `<=>`, so a NULL group key finds its
entries as it does in the Python reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cumulus.errors import NotFoundError, ViewSQLError
from cumulus.m3.validate import MapInfo
from cumulus.schema import NULL
from cumulus.sql.readtime import Finish, Ref, order_sql, to_sql, type_of, view_key
from cumulus.sql.views import Compilation, MapUse, ViewColumn, ViewPlan
from cumulus.store.maps import key_slots, value_slot
from cumulus.store.tables import ENTRIES, MAPS, tag_name


def tag_of(version: int | str | None) -> str | None:
    """The tag a version names: an epoch number reads `epoch-N`, a string is a tag (or a
    template that renders to one, e.g. dbt's `{{ cumulus_tag() }}`), None reads main."""
    if version is None:
        return None
    if isinstance(version, bool):
        raise ViewSQLError(f"not a version: {version!r}")
    if isinstance(version, int):
        if version < 1:
            raise ViewSQLError(f"epochs start at 1, got {version}")
        return tag_name(version)
    if not version or "'" in version or "\\" in version:
        raise ViewSQLError(f"not a tag name: {version!r}")
    return version


def quote(name: str) -> str:
    """A Spark SQL identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Restriction:
    """Some groups of a view: `keys` names a table or temporary view of group keys, one
    column `__g<i>` per group variable i; `slots` gives, for each map the view reads, the
    key slot of maps.entries holding each group variable, as (slot, i) pairs. Every map
    is read for those keys only, compared with `<=>` (a NULL key is a key)."""

    keys: str
    slots: Mapping[str, tuple[tuple[str, int], ...]]


ViewGroups = tuple[tuple[str, ...], dict[str, tuple[tuple[str, int], ...]]]  # view_groups: outputs, slots per map


def view_groups(plan: ViewPlan, maps: Mapping[str, MapInfo]) -> ViewGroups | None:
    """How the rows of a view are found by group: (the output column of each group
    variable, the key slots of every map it reads: (slot, group index) pairs per map);
    None for a view whose rows are not one per group, each a function of its own groups'
    map entries. Used by cumulus/engine/results.py (results.<view> updated by group) and
    cumulus/engine/derived.py (a derived relation's change found by group)."""
    if plan.refresh != "incremental" or not plan.group or plan.bag or plan.subviews or plan.others:
        return None
    group_columns = {c.name: c.group_index for c in plan.columns if c.kind == "group" and c.group_index is not None}
    outputs: dict[int, str] = {}
    if plan.finish is None:
        for name, index in group_columns.items():
            outputs.setdefault(index, name)
    elif plan.finish.limit is not None or plan.finish.offset:
        return None  # which groups are shown depends on the others
    else:
        for name, expr in plan.finish.select:
            if isinstance(expr, Ref) and expr.name in group_columns:
                outputs.setdefault(group_columns[expr.name], name)
    if len(outputs) < len(plan.group):
        return None
    slots: dict[str, tuple[tuple[str, int], ...]] = {}
    for use in plan.uses:
        if not set(plan.group) <= set(use.keys):
            return None  # a map over fewer variables: a change there touches every group
        names = key_slots(maps[use.map])
        pairs = tuple((names[use.keys.index(g)], i) for i, g in enumerate(plan.group))
        if slots.setdefault(use.map, pairs) != pairs:
            return None
    return tuple(outputs[i] for i in range(len(plan.group))), slots


@dataclass(frozen=True)
class _Join:
    alias: str
    cte: str
    on: tuple[tuple[str, str], ...]  # (column of the CTE, group variable)


def view_sql(
    compilation: Compilation,
    view_name: str,
    version: int | str | None = None,
    *,
    catalog: str | None = None,
    table: str | None = None,
    order: bool = True,
    groups: Restriction | None = None,
) -> str:
    """Spark SQL giving the rows of `view_name` (columns in SELECT order) from its maps,
    at `version` (see tag_of). The maps table is `[catalog.]maps.entries`, or `table`
    (dbt's `{{ source(...) }}`). `order` sorts by the group columns. `groups`: only the
    rows of the groups it lists (results.<view> updated by the groups an epoch touched),
    before ORDER BY and LIMIT (a top-k view's candidates among them)."""
    plan = compilation.views.get(view_name)
    if plan is None:
        known = ", ".join(compilation.views) or "none"
        raise NotFoundError(f"unknown view {view_name} (views: {known})")
    tag = tag_of(version)
    if table is None:
        prefix = f"{quote(catalog)}." if catalog else ""
        table = f"{prefix}{MAPS}.{ENTRIES}"
    return _Builder(compilation.checked.maps, plan, tag, table, restriction=groups).sql(order)


def plan_sql(maps: Mapping[str, MapInfo], plan: ViewPlan, table: str, groups: Restriction | None = None) -> str:
    """Spark SQL giving the rows of a view plan (a derived relation's, cumulus/engine/
    derived.py) from the map rows in `table` (any table or temporary view shaped as
    maps.entries: map, key slots, value slots), unordered; `groups`: only the rows of
    the groups it lists."""
    return _Builder(maps, plan, None, table, restriction=groups).sql(False)


class _Builder:
    def __init__(self, maps: Mapping[str, MapInfo], plan: ViewPlan, tag: str | None, table: str, prefix: str = "",
                 restriction: Restriction | None = None):
        self.prefix = prefix
        self.restriction = restriction  # of every CTE name (a subquery's view: its own names, unique in the query)
        self.subviews_done: list[str] = []
        self.maps = maps
        self.plan = plan
        self.tag = tag
        self.table = table
        self.ctes: dict[str, str] = {}  # name -> body, in order
        self.map_ctes: dict[str, str] = {}  # map -> CTE name
        self.joins: dict[tuple, _Join] = {}

    # -- CTEs
    def map_cte(self, name: str) -> str:
        """The map's entries: its rows summed per key."""
        if name in self.map_ctes:
            return self.map_ctes[name]
        info = self.maps[name]
        slots = [quote(s) for s in key_slots(info)]
        version = f" VERSION AS OF '{self.tag}'" if self.tag else ""
        select = ", ".join(
            [*(f"{s} AS {quote(k)}" for s, k in zip(slots, info.key_names, strict=True)),
             f"SUM({quote(value_slot(info.type))}) AS `value`"]
        )
        body = f"SELECT {select}\n    FROM {self.table}{version}\n    WHERE `map` = '{name}'"
        if self.restriction is not None:  # the listed groups' entries only
            on = " AND ".join(f"r.`__g{i}` <=> {quote(slot)}" for slot, i in self.restriction.slots[name])
            body += f" AND EXISTS (SELECT 1 FROM {self.restriction.keys} r WHERE {on})"
        if slots:
            body += f"\n    GROUP BY {', '.join(slots)}"
        cte = f"{self.prefix}map_{len(self.map_ctes)}"
        self.map_ctes[name] = cte
        self.ctes[cte] = body
        return cte

    def key_columns(self, use: MapUse) -> list[tuple[str, str]]:
        """(map key column, view variable) pairs, by position."""
        names = self.maps[use.map].key_names
        return list(zip(names, use.keys, strict=True))

    def groups_cte(self) -> None:
        plan = self.plan
        if not plan.group and not plan.bag and not plan.nonempty:
            self.ctes[f"{self.prefix}groups"] = "SELECT 1 AS `__one`"  # one row, even over nothing
            return
        source = self.map_cte(plan.count.map)
        cols = dict((var, col) for col, var in self.key_columns(plan.count))
        select = ", ".join(f"{quote(cols[g])} AS {quote(g)}" for g in plan.group) or "1 AS `__one`"
        body = f"SELECT {select}\n    FROM {source}"
        if plan.bag:  # a SELECT without aggregates: each row as many times as its count
            body += "\n    LATERAL VIEW explode(sequence(1, CAST(`value` AS INT))) `__rows` AS `__row`"
        self.ctes[f"{self.prefix}groups"] = f"{body}\n    WHERE `value` > 0"

    # -- joins onto groups
    def entry(self, use: MapUse) -> str:
        """The map's value for the row's group (NULL when it has no entry)."""
        key = ("map", use.map, use.keys)
        if key not in self.joins:
            cte = self.map_cte(use.map)
            self.joins[key] = _Join(f"j{len(self.joins)}", cte, tuple(self.key_columns(use)))
        return f"{self.joins[key].alias}.`value`"

    def extreme(self, col: ViewColumn) -> str:
        """MIN/MAX (COUNT/SUM of the distinct values) of the value variable over the
        value-count map's live entries."""
        use = col.values
        key = ("extreme", use.map, use.keys, col.value_var)
        if key not in self.joins:
            source = self.map_cte(use.map)
            cols = dict((var, c) for c, var in self.key_columns(use))
            group = [quote(cols[g]) for g in self.plan.group]
            value = quote(cols[col.value_var])
            select = ", ".join(
                [*(f"{g} AS {quote(v)}" for g, v in zip(group, self.plan.group, strict=True)),
                 f"MIN({value}) AS `__min`", f"MAX({value}) AS `__max`"]
                + [f"{agg}({value}) AS `__{agg.lower()}`" for agg in self.distinct_aggregates(use, col.value_var)]
            )
            body = f"SELECT {select}\n    FROM {source}\n    WHERE `value` > 0 AND {value} IS NOT NULL"
            if group:
                body += f"\n    GROUP BY {', '.join(group)}"
            cte = f"{self.prefix}extreme_{sum(k[0] == 'extreme' for k in self.joins)}"
            self.ctes[cte] = body
            on = tuple((g, g) for g in self.plan.group)
            self.joins[key] = _Join(f"j{len(self.joins)}", cte, on)
        alias = self.joins[key].alias
        if col.kind == "count_distinct":
            return f"COALESCE({alias}.`__count`, 0)"
        if col.kind == "avg_distinct":
            return f"CAST({alias}.`__sum` AS DOUBLE) / {alias}.`__count`"
        return f"{alias}.{ {'min': '`__min`', 'max': '`__max`', 'sum_distinct': '`__sum`'}[col.kind]}"

    def distinct_aggregates(self, use: MapUse, var: str | None) -> list[str]:
        """COUNT and/or SUM of the distinct values, as the plan's ..._distinct columns of
        this value need them."""
        kinds = {c.kind for c in self.plan.columns if c.values == use and c.value_var == var}
        return [agg for agg, needs in (("COUNT", ("count_distinct", "avg_distinct")), ("SUM", ("sum_distinct", "avg_distinct")))
                if kinds & set(needs)]

    # -- the SELECT
    def column(self, col: ViewColumn) -> str:
        plan = self.plan
        if col.kind == "group" or (col.kind in ("min", "max", "sum_distinct") and col.values is None):
            return f"g.{quote(plan.group[col.group_index])}"
        if col.kind == "count_distinct" and col.values is None:
            return f"CASE WHEN g.{quote(plan.group[col.group_index])} IS NULL THEN 0 ELSE 1 END"
        if col.kind == "avg_distinct" and col.values is None:
            return f"CAST(g.{quote(plan.group[col.group_index])} AS DOUBLE)"
        if col.value_var is not None:
            return self.extreme(col)
        if col.kind == "count":
            return f"COALESCE({self.entry(col.values)}, 0)"
        count = f"COALESCE({self.entry(col.nonnull or plan.count)}, 0)"
        total = f"COALESCE({self.entry(col.values)}, 0)"
        if col.kind == "sum":
            return f"CASE WHEN {count} <> 0 THEN {total} END"
        return f"CASE WHEN {count} <> 0 THEN CAST({total} AS DOUBLE) / {count} END"

    def sql(self, order: bool) -> str:
        plan = self.plan
        self.groups_cte()
        columns = [f"{self.column(c)} AS {quote(c.name)}" for c in plan.columns]
        lines = [f"-- view {plan.name} {'at ' + repr(self.tag) if self.tag else 'on main (fresh)'}: its rows from its maps"]
        self.subviews = {view_key(s.name): self.subview_cte(s) for s in plan.subviews}
        if plan.finish is not None:  # the maintained columns and group keys, then the read-time layer
            columns += [f"g.{quote(g)} AS `__group{i}`" for i, g in enumerate(plan.group)]
            columns = columns or ["1 AS `__one`"]  # (constants only, read once per group: DISTINCT 0 ...)
            select = ["SELECT " + ",\n       ".join(columns), f"FROM {self.prefix}groups g"]
            select += [self.join_line(j) for j in self.joins.values()]
            self.ctes[f"{self.prefix}base"] = "\n    ".join(select)
        lines.append("WITH " + ",\n".join(f"{name} AS (\n    {body}\n)" for name, body in self.ctes.items()))
        if plan.finish is not None:
            lines += self.finish_lines(plan.finish)
            return "\n".join(lines) + "\n"
        lines.append("SELECT " + ",\n       ".join(columns))
        lines.append(f"FROM {self.prefix}groups g")
        lines += [self.join_line(j) for j in self.joins.values()]
        group_outputs = [str(i + 1) for i, c in enumerate(plan.columns) if c.kind == "group"]
        if order and group_outputs:
            lines.append(f"ORDER BY {', '.join(group_outputs)}")
        return "\n".join(lines) + "\n"

    def subview_cte(self, sub: ViewPlan) -> str:
        """A subquery's view (its one column) as a CTE of its own query."""
        name = f"{self.prefix}sub_{len(self.subviews_done)}"
        self.subviews_done.append(name)
        body = _Builder(self.maps, sub, self.tag, self.table, prefix=f"{name}_")  # Spark refuses shadowed CTE names
        self.ctes[name] = body.sql(order=False).rstrip().replace("\n", "\n    ")
        return name

    @staticmethod
    def join_line(join: _Join) -> str:
        cond = " AND ".join(f"{join.alias}.{quote(c)} <=> g.{quote(v)}" for c, v in join.on) or "TRUE"
        return f"LEFT JOIN {join.cte} {join.alias} ON {cond}"

    def finish_lines(self, finish: Finish) -> list[str]:
        """SELECT list, HAVING (a WHERE over `base`), ORDER BY (then the group key, NULLs
        first, as readtime.ranked breaks ties), LIMIT and OFFSET; of a restriction to some
        groups, the first two alone."""
        types = self.plan.types
        subviews = self.subviews

        def ref(name: str) -> str:
            return subviews[name] if name in subviews else f"b.{quote(name)}"

        # A NULL item (NULL AS z) has no type of its own; a catalog view's column needs one.
        select = [f"{'CAST(NULL AS BIGINT)' if type_of(e, types) == NULL else to_sql(e, ref, types)} AS {quote(n)}"
                  for n, e in finish.select]
        lines = ["SELECT " + ",\n       ".join(select), f"FROM {self.prefix}base b"]
        if finish.having is not None:
            lines.append(f"WHERE {to_sql(finish.having, ref, types)}")
        if self.restriction is not None:  # the listed groups' rows, unordered and uncut
            return lines
        keys = [order_sql(o, ref, types) for o in finish.order]
        keys += [f"b.`__group{i}` ASC NULLS FIRST" for i in range(len(self.plan.group))]
        if keys:
            lines.append("ORDER BY " + ", ".join(keys))
        if finish.limit is not None:
            lines.append(f"LIMIT {finish.limit}")
        if finish.offset:
            lines.append(f"OFFSET {finish.offset}")
        return lines
