"""Views kept by full refresh (refresh mode `full`): SQL that has no incremental form here
(or that asked for `full`) is recomputed by Spark SQL over base.* at each close and its
rows stored as one map of the home, `<view>_rows`, keyed by the view's columns (and, for a
view with ORDER BY or LIMIT, its row's position first), the value a row's multiplicity.
So such a view is read, tagged, validated and published like any other; its fresh reads
are those of the last close. This module is pure: the map and the read plan of such a
view, from its output columns (cumulus/engine/refresh.py computes and writes the rows)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from cumulus.m3.validate import MapInfo
from cumulus.schema import BOOL, DATE, DECIMAL, DECIMAL_SCALE, FLOAT, INT, STRING
from cumulus.sql.readtime import Finish, Order, Ref
from cumulus.sql.views import Compilation, MapUse, ViewColumn, ViewPlan

POSITION = "__position"  # the key of an ordered view's row position


@dataclass(frozen=True)
class FullView:
    """A view kept by full refresh: its SQL, its output columns (name, M3 type) as Spark
    SQL gives them, whether its rows come in an order of their own, and why it is full."""

    name: str
    sql: str
    columns: tuple[tuple[str, str], ...]
    ordered: bool
    reason: str

    @property
    def map_name(self) -> str:
        return f"{self.name}_rows"

    def to_json(self) -> str:
        return json.dumps({"columns": [list(c) for c in self.columns], "ordered": self.ordered, "reason": self.reason})

    @classmethod
    def from_json(cls, name: str, sql: str, text: str) -> FullView:
        data = json.loads(text)
        return cls(name, sql, tuple((n, t) for n, t in data["columns"]), bool(data["ordered"]), data.get("reason", ""))


def m3_type(spark_type: str) -> str:
    """The M3 type a Spark SQL result column is stored as (a decimal with more digits after
    the point than the maps keep, and any other number, as a double)."""
    t = spark_type.lower()
    if t in ("tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long"):
        return INT
    if t.startswith("decimal"):
        scale = int(t.rstrip(")").split(",")[1]) if "," in t else 0
        return DECIMAL if scale <= DECIMAL_SCALE else FLOAT
    if t in ("string", "varchar", "char") or t.startswith(("varchar", "char")):
        return STRING
    if t == "date":
        return DATE
    if t == "boolean":
        return BOOL
    return FLOAT


def full_map(view: FullView) -> MapInfo:
    keys = ((POSITION, INT),) if view.ordered else ()
    keys += view.columns
    return MapInfo(view.map_name, tuple(n for n, _ in keys), tuple(t for _, t in keys), INT)


def full_plan(view: FullView) -> ViewPlan:
    """How readers present the stored rows: each as many times as its count, in position
    order for an ordered view (then as the view's own ORDER BY and LIMIT gave them)."""
    info = full_map(view)
    group = info.key_names
    columns = tuple(ViewColumn(n, "group", group_index=i, type=t, hidden=(n == POSITION))
                    for i, (n, t) in enumerate(zip(info.key_names, info.key_types, strict=True)))
    finish = None
    if view.ordered:
        finish = Finish(tuple((n, Ref(n)) for n, _ in view.columns), None, (Order(Ref(POSITION), False, False),),
                        None, None)
    return ViewPlan(view.name, view.sql, group, MapUse(info.name, group), columns, finish=finish, bag=True,
                    refresh="full", refresh_reason=view.reason)


def with_full_view(compiled: Compilation, view: FullView) -> Compilation:
    """`compiled` plus a view kept by full refresh: its rows map and its read plan (no
    statement writes the map: each close does, cumulus/engine/refresh.py)."""
    if view.map_name in compiled.checked.maps or view.name in compiled.views:
        raise ValueError(f"view {view.name}: the name is taken")
    maps = dict(compiled.checked.maps) | {view.map_name: full_map(view)}
    return replace(compiled, checked=replace(compiled.checked, maps=maps), views=dict(compiled.views) | {
        view.name: full_plan(view)})
