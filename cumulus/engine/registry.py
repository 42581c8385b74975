"""The registered views of a home (`cumulus.views`) and the program compiled from them.
Views are compiled together, in registration order, so map names are stable: adding a
view keeps every existing map and its table, and adds tables for the new maps only."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.engine.evaluate import BatchPlan, plan_from_compilation
from cumulus.errors import ViewError
from cumulus.schema import Schema
from cumulus.sql.views import Compilation, compile_views
from cumulus.store.rows import Reader, read_rows
from cumulus.store.tables import META, ensure_table, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VIEWS_COLUMNS = (
    ("name", "STRING"),
    ("sql", "STRING"),  # the view's SELECT, or a hand-written M3 program
    ("kind", "STRING"),  # sql | m3
    ("position", "INT"),
    ("added_epoch", "BIGINT"),
    ("added_at", "TIMESTAMP"),
)


SQL, M3 = "sql", "m3"


@dataclass(frozen=True)
class RegisteredView:
    name: str
    sql: str
    kind: str
    position: int
    added_epoch: int
    added_at: dt.datetime | None


def views_table(settings: Settings) -> str:
    return qualified(settings, META, "views")


def ensure_views_table(spark: SparkSession, settings: Settings) -> None:
    ensure_table(spark, views_table(settings), VIEWS_COLUMNS)


def registered_views(reader: Reader, settings: Settings) -> list[RegisteredView]:
    """The views in registration order ([] before the first `view add`)."""
    try:
        rows = read_rows(reader, views_table(settings))
    except Exception as exc:  # the table does not exist yet
        if "not found" in str(exc).lower() or "NoSuchTable" in type(exc).__name__ or "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            return []
        raise
    # A home made before programs could be registered has no `kind`: its views are SQL.
    return [RegisteredView(**{**r, "kind": r.get("kind") or SQL}) for r in sorted(rows, key=lambda r: r["position"])]


def compile_registered(schema: Schema, views: list[RegisteredView]) -> Compilation:
    """One program for everything registered: the SQL views compiled together (sharing
    maps), then each hand-written M3 program added with its own maps."""
    compiled = compile_views(schema, [(v.name, v.sql) for v in views if v.kind == SQL])
    for v in views:
        if v.kind == M3:
            compiled = with_program(compiled, v.name, v.sql)
    return compiled


def with_program(compiled: Compilation, name: str, text: str) -> Compilation:
    """`compiled` plus a hand-written M3 program: its maps are added (names must be new),
    its triggers appended to the same events' triggers, and its statements run as the
    engine runs hand-written programs (each event's own trigger, see plan_from_program).
    Its maps are read as maps (READ_SLICE, `cumulus read MAP`); it adds no view."""
    from cumulus.engine.evaluate import plan_from_program
    from cumulus.m3.ast import Program, Trigger
    from cumulus.m3.parser import parse_program
    from cumulus.m3.validate import validate

    schema = compiled.schema
    own = validate(parse_program(text, name), schema, text)
    clash = sorted(set(own.maps) & set(compiled.checked.maps))
    if clash:
        raise ViewError(f"program {name}: map name(s) {', '.join(clash)} already belong to registered views; rename them")
    plan = plan_from_program(own)  # refuses triggers that read what their relation writes

    base = compiled.checked.program
    events = {t.event: t for t in base.triggers}
    for t in own.program.triggers:
        columns = schema.relation(t.relation).column_names
        t = Trigger(t.sign, t.relation, columns, tuple(_rename_params(t.statements, t.params, columns)))
        events[t.event] = replace(t, statements=events[t.event].statements + t.statements) if t.event in events else t
    checked = validate(Program(base.decls + own.program.decls, tuple(events.values())), schema)
    batch = {rel: list(stmts) for rel, stmts in compiled.batch.items()}
    for rel, stmts in plan.statements.items():
        columns = schema.relation(rel).column_names
        renamed = _rename_params([bs.statement for bs in stmts], plan.params[rel], columns)
        batch.setdefault(rel, []).extend(replace(bs, statement=st) for bs, st in zip(stmts, renamed, strict=True))
    return replace(compiled, checked=checked, batch=batch)


def batch_plan(compilation: Compilation) -> BatchPlan:
    return plan_from_compilation(compilation.checked, compilation.batch)


def _rename_params(statements, params, new_params):
    """Statements with trigger parameters `params` renamed to `new_params`, renaming first
    any other variable that already has one of the new names (no capture)."""
    from cumulus.m3.ast import Statement, Var
    from cumulus.sql.calculus import rename

    used = {e.name for s in statements for part in (s.target, s.expr) for e in part.walk() if isinstance(e, Var)}
    clashes = (used - set(params)) & set(new_params)
    fresh = {name: Var(f"{name}__m3") for name in clashes}
    fresh.update({old: Var(new) for old, new in zip(params, new_params, strict=True)})
    return [Statement(rename(s.target, fresh), rename(s.expr, fresh)) for s in statements]
