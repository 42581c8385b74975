"""The registered views of a home (`cumulus.views`) and the program compiled from them.
Views are compiled together, in registration order, so map names are stable: adding a
view keeps every existing map and its table, and adds tables for the new maps only."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, replace
from typing import TYPE_CHECKING

from cumulus.config import DEFAULT_DIALECT, Settings
from cumulus.engine.evaluate import BatchPlan, plan_from_compilation
from cumulus.errors import NotFoundError, ViewError
from cumulus.schema import Schema
from cumulus.spark.local import local_frame
from cumulus.sql.full import FullView, with_full_view
from cumulus.sql.views import Compilation, compile_views
from cumulus.store.rows import Reader, read_rows
from cumulus.store.tables import META, ddl_type, ensure_table, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VIEWS_COLUMNS = (
    ("name", "STRING"),
    ("sql", "STRING"),  # the view's SELECT, or a hand-written M3 program
    ("kind", "STRING"),  # sql | m3
    ("position", "INT"),
    ("added_epoch", "BIGINT"),
    ("added_at", "TIMESTAMP"),
    ("columns", "STRING"),  # a view kept by full refresh: its columns, order and reason (sql.full.FullView, JSON)
)


SQL, M3, FULL = "sql", "m3", "full"  # FULL: SQL kept by full refresh (cumulus/sql/full.py)
DROPPED = "dropped"  # the kind of the row `view drop` appends: the view of that name is gone


@dataclass(frozen=True)
class RegisteredView:
    name: str
    sql: str
    kind: str
    position: int
    added_epoch: int
    added_at: dt.datetime | None
    columns: str | None = None  # FULL: sql.full.FullView's JSON

    def full(self) -> FullView:
        """A view kept by full refresh: its columns, order and reason, as registered."""
        return FullView.from_json(self.name, self.sql, self.columns or "")


def views_table(settings: Settings) -> str:
    return qualified(settings, META, "views")


def ensure_views_table(spark: SparkSession, settings: Settings) -> None:
    ensure_table(spark, views_table(settings), VIEWS_COLUMNS)


def registry(reader: Reader, settings: Settings) -> list[RegisteredView]:
    """Every row of the registry in registration order ([] before the first `view add`):
    the views ever added, and a `dropped` row for each view dropped since."""
    try:
        rows = read_rows(reader, views_table(settings))
    except Exception as exc:  # the table does not exist yet
        if "not found" in str(exc).lower() or "NoSuchTable" in type(exc).__name__ or "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            return []
        raise
    # A home made before programs could be registered has no `kind`: its views are SQL.
    return [RegisteredView(**{**r, "kind": r.get("kind") or SQL}) for r in sorted(rows, key=lambda r: r["position"])]


def live(rows: list[RegisteredView]) -> list[RegisteredView]:
    """The registry's views that were not dropped."""
    gone = dropped(rows)
    return [v for v in rows if v.kind != DROPPED and v.name not in gone]


def dropped(rows: list[RegisteredView]) -> set[str]:
    return {v.name for v in rows if v.kind == DROPPED}


def is_registered(rows: list[RegisteredView], name: str) -> bool:
    """True for a registered view, False for one dropped before (a retry of `view drop`);
    NotFoundError for a name the registry never had."""
    if any(v.name == name for v in live(rows)):
        return True
    if name in dropped(rows):
        return False
    views = ", ".join(v.name for v in live(rows)) or "none"
    raise NotFoundError(f"no view named {name} is registered (views: {views})")


def append_row(spark: SparkSession, settings: Settings, view: RegisteredView) -> None:
    """Append a row to the registry (a view added, or the `dropped` row of one)."""
    local_frame(spark, [astuple(view)], ddl_type(VIEWS_COLUMNS)).writeTo(views_table(settings)).append()


def registered_views(reader: Reader, settings: Settings) -> list[RegisteredView]:
    """The views registered and not dropped, in registration order."""
    return live(registry(reader, settings))


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
    from cumulus.engine.evaluate import plan_from_program
    from cumulus.m3.ast import Program, Trigger
    from cumulus.m3.parser import parse_program
    from cumulus.m3.validate import validate

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
    from cumulus.m3.ast import Statement, Var
    from cumulus.sql.calculus import rename

    used = {e.name for s in statements for part in (s.target, s.expr) for e in part.walk() if isinstance(e, Var)}
    clashes = (used - set(params)) & set(new_params)
    fresh = {name: Var(f"{name}__m3") for name in clashes}
    fresh.update({old: Var(new) for old, new in zip(params, new_params, strict=True)})
    return [Statement(rename(s.target, fresh), rename(s.expr, fresh)) for s in statements]
