"""The program compiled from the registered views of a home (the registry itself, the
table `cumulus.views`, is the store's: cumulus/store/registry.py).
Views are compiled together, in registration order, so map names are stable: adding a
view keeps every existing map and its table, and adds tables for the new maps only."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import replace

from cumulus.config import DEFAULT_DIALECT
from cumulus.engine.evaluate import BatchPlan, plan_from_compilation, plan_from_program
from cumulus.errors import ViewError
from cumulus.m3.ast import Program, Statement, Trigger, Var
from cumulus.m3.parser import parse_program
from cumulus.m3.validate import validate
from cumulus.schema import Schema
from cumulus.sql.calculus import rename
from cumulus.sql.full import FullView, with_full_view
from cumulus.sql.views import Compilation, compile_views
from cumulus.store.registry import DROPPED, FULL, M3, SQL, RegisteredView, dropped


def as_full_view(view: RegisteredView) -> FullView:
    """A view kept by full refresh: its columns, order and reason, as registered."""
    return FullView.from_json(view.name, view.sql, view.columns or "")


def compile_registered(schema: Schema, rows: list[RegisteredView], dialect: str = DEFAULT_DIALECT) -> Compilation:
    """One program for everything registered (`rows`: the registry, `registry`), the
    dropped views left out (`without`). `dialect`: the home's `sql_dialect`."""
    return without(*compile_all(schema, rows, dialect), dropped(rows))


def compile_all(
    schema: Schema, rows: list[RegisteredView], dialect: str = DEFAULT_DIALECT,
) -> tuple[Compilation, dict[str, set[str]]]:
    """Every view the registry ever had, dropped ones too, in their place: the SQL views
    compiled together (sharing maps), then each hand-written M3 program added with its
    own maps; and the maps of each program. Dropped views are compiled so that every map
    keeps its name (map names come from the view that first needed them, and old epochs'
    tags hold the maps under those names)."""
    compiled, programs = _compiled(
        schema, tuple((v.name, v.sql, v.kind, v.columns or "") for v in rows if v.kind != DROPPED), dialect)
    return compiled, dict(programs)


@functools.lru_cache(maxsize=4)
def _compiled(
    schema: Schema, views: tuple[tuple[str, str, str, str], ...], dialect: str,
) -> tuple[Compilation, dict[str, set[str]]]:
    """compile_all's work for the views (name, text, kind, columns), kept for the last few
    registries a process saw: a Compilation is immutable, and `view add` compiles the
    registry before and after the view (the one before: the last add's after). A view
    kept by full refresh adds its rows map and its read plan (sql.full)."""
    compiled = compile_views(schema, [(name, text) for name, text, kind, _ in views if kind == SQL], dialect)
    programs: dict[str, set[str]] = {}  # program (or full view) -> its maps
    for name, text, kind, columns in views:
        if kind == M3:
            before = set(compiled.checked.maps)
            compiled = with_program(compiled, name, text)
            programs[name] = set(compiled.checked.maps) - before
        elif kind == FULL:
            full = FullView.from_json(name, text, columns)
            compiled = with_full_view(compiled, full)
            programs[name] = {full.map_name}
    return compiled, programs


def needed_maps(compiled: Compilation, views: Iterable[str], programs: Mapping[str, set[str]]) -> set[str]:
    """The maps the views' results depend on (directly or through the deltas of other
    maps), and the maps of the hand-written programs named in `programs`."""
    out = {m for m, users in compiled.sharing().items() if set(users) & set(views)}
    for maps in programs.values():
        out |= maps
    return out


def without(compiled: Compilation, programs: Mapping[str, set[str]], gone: set[str]) -> Compilation:
    """The compilation (`compile_all`, with the maps of each hand-written program in
    `programs`) without the views and programs in `gone`: only the maps the others need,
    and only the statements that write those."""
    if not gone:
        return compiled
    views = {n: v for n, v in compiled.views.items() if n not in gone}
    needed = needed_maps(compiled, views, {p: m for p, m in programs.items() if p not in gone})
    program = compiled.checked.program
    triggers = tuple(
        replace(t, statements=tuple(s for s in t.statements if s.target.name in needed)) for t in program.triggers
    )
    program = replace(program, decls=tuple(d for d in program.decls if d.name in needed), triggers=triggers)
    checked = replace(compiled.checked, program=program, maps={m: i for m, i in compiled.checked.maps.items() if m in needed})
    return replace(
        compiled, checked=checked, views=views,
        maps={m: d for m, d in compiled.maps.items() if m in needed},
        batch={r: [bs for bs in stmts if bs.statement.target.name in needed] for r, stmts in compiled.batch.items()},
        derived={n: d for n, d in compiled.derived.items() if set(d.maps) <= needed},
    )


def with_program(compiled: Compilation, name: str, text: str) -> Compilation:
    """`compiled` plus a hand-written M3 program: its maps are added (names must be new),
    its triggers appended to the same events' triggers, and its statements run as the
    engine runs hand-written programs (each event's own trigger, see plan_from_program).
    Its maps are read as maps (READ_SLICE, `cumulus read MAP`); it adds no view."""
    schema = compiled.checked.schema  # (with the derived relations of nested queries)
    own = validate(parse_program(text, name), compiled.schema, text)
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
    return plan_from_compilation(compilation.checked, compilation.batch, compilation.derived)


def _rename_params(statements, params, new_params):
    """Statements with trigger parameters `params` renamed to `new_params`, renaming first
    any other variable that already has one of the new names (no capture)."""
    used = {e.name for s in statements for part in (s.target, s.expr) for e in part.walk() if isinstance(e, Var)}
    clashes = (used - set(params)) & set(new_params)
    fresh = {name: Var(f"{name}__m3") for name in clashes}
    fresh.update({old: Var(new) for old, new in zip(params, new_params, strict=True)})
    return [Statement(rename(s.target, fresh), rename(s.expr, fresh)) for s in statements]
