"""`cumulus view add|drop|list|show|sql`, `cumulus apply`, `cumulus read`: the engine from the
command line. Writes run a Spark job; reads use PyIceberg (no JVM)."""

from __future__ import annotations

import argparse
import sys

from cumulus.commands import engine_for
from cumulus.config import settings_from_args
from cumulus.errors import CumulusError, NotFoundError
from cumulus.output import FORMATS, render, sort_key
from cumulus.store.catalog import pyiceberg_catalog


def cmd_view_add(args: argparse.Namespace) -> int:
    from cumulus.commands.inputs import read_text
    from cumulus.store.registry import FULL, M3, SQL

    kind = M3 if args.sql.endswith(".m3") or args.m3 else FULL if args.refresh == "full" else SQL
    name = args.name.lower()
    text = read_text(args.sql)
    compiled = engine_for(args).add_view(name, text, kind, force=args.force)
    if kind == M3:
        from cumulus.m3.parser import parse_program

        maps = parse_program(text, name).map_names
        print(f"program {name}: registered; maps {', '.join(maps)} (read them with `cumulus read MAP`)")
        return 0
    plan = compiled.views[name]
    print(f"view {plan.name}: registered; columns {', '.join(plan.column_names)}; reads maps {', '.join(plan.maps)}")
    if plan.refresh == "full":
        print(f"view {plan.name}: kept by full refresh (recomputed over base.* at each close; its fresh reads are the "
              f"last close's): {plan.refresh_reason}")
    print(f"view {plan.name}: in SQL, views_stable.{plan.name} (the latest closed epoch) and views.{plan.name} (fresh)")
    return 0


def cmd_view_drop(args: argparse.Namespace) -> int:
    from cumulus.store.registry import is_registered, registry

    name = args.name.lower()
    settings = settings_from_args(args)
    is_registered(registry(pyiceberg_catalog(settings), settings), name)  # an unknown name is refused without a JVM
    dropped = engine_for(args).drop_view(name)
    if not dropped.was_registered:
        print(f"view {name}: was dropped already; removed what a stopped drop left: "
              f"the rows of {len(dropped.removed)} maps")
        return 0
    shared = f"; kept {len(dropped.shared)} maps other views share ({', '.join(dropped.shared)})" if dropped.shared else ""
    print(f"view {name}: dropped; views.{name} and views_stable.{name} removed; "
          f"the rows of {len(dropped.removed)} maps no other view needs removed{shared}")
    return 0


def cmd_view_list(args: argparse.Namespace) -> int:
    from cumulus.store.registry import registered_views

    settings = settings_from_args(args)
    views = registered_views(pyiceberg_catalog(settings), settings)
    from cumulus.engine.registry import as_full_view
    from cumulus.store.registry import FULL, M3

    def mode(v) -> tuple[str, str]:
        if v.kind == FULL:
            return "full", as_full_view(v).reason
        return ("program", "") if v.kind == M3 else ("incremental", "")

    rows = [(v.name, *mode(v), v.added_epoch, v.added_at, " ".join(v.sql.split())[:70]) for v in views]
    sys.stdout.write(render(["view", "refresh", "reason", "added_epoch", "added_at", "sql"], rows, args.format))
    return 0


def cmd_view_show(args: argparse.Namespace) -> int:
    from cumulus.read import Reader

    reader = Reader(settings_from_args(args))
    compiled = reader.compilation
    plan = compiled.views.get(args.name.lower())
    if plan is None:
        raise NotFoundError(f"unknown view {args.name} (views: {', '.join(compiled.views)})")
    print(f"-- view {plan.name}\n{plan.sql.strip()}\n")
    print(f"-- columns: {', '.join(plan.column_names)}")
    print(f"-- group count map: {plan.count.map}")
    for c in plan.columns:
        if c.values:
            extra = f" (non-NULL count: {c.nonnull.map})" if c.nonnull else ""
            print(f"--   {c.name}: {c.kind} from {c.values.map}{extra}")
    return 0


def cmd_view_sql(args: argparse.Namespace) -> int:
    from cumulus.read import Reader
    from cumulus.sql.mapsql import view_sql

    settings = settings_from_args(args)
    reader = Reader(settings)
    sys.stdout.write(view_sql(reader.compilation, args.name.lower(), args.epoch, catalog=settings.catalog))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    applied = engine_for(args).apply(args.source, args.epoch)
    print(f"epoch {applied.epoch} source {args.source}: {applied.summary}")
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    from cumulus.read import At, Reader

    reader = Reader(settings_from_args(args))
    at = reader.stable(args.epoch) if (args.stable or args.epoch) else At()
    if args.stable and args.epoch is None:
        print(f"cumulus: reading the stable snapshot of epoch {at.epoch} (the latest closed)", file=sys.stderr, flush=True)
    where = {}
    for item in args.key or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise CumulusError(f"--key takes COLUMN=VALUE, got {item!r}")
        where[name.lower()] = value
    name = args.name.lower()
    if name in reader.compilation.views:
        rows = reader.read_view(name, at, where)
        sys.stdout.write(render(reader.view_columns(name), rows, args.format))
        return 0
    info = reader.compilation.checked.maps.get(name)
    if info is None:
        raise NotFoundError(f"no view or map named {args.name}")
    keys = [where.pop(k, None) for k in info.key_names]
    if where:
        raise CumulusError(f"map {name} has no key {', '.join(where)} (keys: {', '.join(info.key_names)})")
    from cumulus.schema import parse_value

    typed = [None if k is None else parse_value(k, t) for k, t in zip(keys, info.key_types, strict=True)]

    entries = reader.read_slice(name, *typed, at=at)
    rows = sorted((k + (v,) for k, v in entries.items()), key=sort_key)
    sys.stdout.write(render(list(info.key_names) + ["value"], rows, args.format))
    return 0


def register(subparsers) -> None:
    view = subparsers.add_parser("view", help="register, drop, list and show views")
    sub = view.add_subparsers(dest="view_command", metavar="SUBCOMMAND")
    sub.required = True
    add = sub.add_parser("add", help="compile a view with the registered ones, create and back-fill its maps")
    add.add_argument("name", help="the view's name")
    add.add_argument("sql", help="a file holding the view's SELECT, or an M3 program (*.m3); '-' for standard input")
    add.add_argument("--m3", action="store_true", help="the input is a hand-written M3 program (implied by .m3)")
    add.add_argument("--force", action="store_true",
                     help="add it even when its maps' estimated entries per base row pass max_entries_per_base_row")
    add.add_argument("--refresh", choices=("auto", "full"), default="auto",
                     help="auto (default): incrementally where the SQL allows, else by full refresh at each close "
                          "(unless full_refresh = \"refuse\"); full: always by full refresh")
    add.set_defaults(func=cmd_view_add)
    drop = sub.add_parser(
        "drop", help="drop a view: its catalog views and the maps no other view needs",
        description="Drop a registered view (or hand-written program). Its catalog views go, and "
        "the rows of its maps that no other view needs are deleted from the fresh state; maps "
        "other views share stay. Tags of closed epochs keep what they hold. The name stays "
        "reserved: map names come from view names.",
    )
    drop.add_argument("name")
    drop.set_defaults(func=cmd_view_drop)
    ls = sub.add_parser("list", help="the registered views")
    ls.add_argument("--format", choices=FORMATS, default="table")
    ls.set_defaults(func=cmd_view_list)
    show = sub.add_parser("show", help="a view's SQL and the maps it reads")
    show.add_argument("name")
    show.set_defaults(func=cmd_view_show)
    sql = sub.add_parser(
        "sql", help="a view as Spark SQL over its map tables (for the Thrift server, dbt, BI tools)",
        description="Print Spark SQL that gives the view's rows from its map tables, exactly as "
        "`cumulus read` does: at a closed epoch's tag with --epoch, else on main (fresh).",
    )
    sql.add_argument("name")
    sql.add_argument("--epoch", type=int, help="read the maps at tag epoch-N (default: main)")
    sql.set_defaults(func=cmd_view_sql)

    apply = subparsers.add_parser("apply", help="apply a source's new events of the open epoch to the maps")
    apply.add_argument("--source", required=True, help="the source whose events to apply")
    apply.add_argument("--epoch", type=int, help="the epoch (default: the open one)")
    apply.set_defaults(func=cmd_apply)

    read = subparsers.add_parser(
        "read", help="read a view or a map: fresh (main) or stable (an epoch's tag)",
        description="Read a view's rows as its SQL gives them, or a map's entries. Without "
        "--stable/--epoch: the freshest values (every applied delta).",
    )
    read.add_argument("name", help="a view or a map")
    read.add_argument("--stable", action="store_true", help="the latest closed epoch (consistent)")
    read.add_argument("--epoch", type=int, help="a given closed epoch")
    read.add_argument("--key", action="append", metavar="COLUMN=VALUE", help="keep rows with this value (repeatable)")
    read.add_argument("--format", choices=FORMATS, default="table")
    read.set_defaults(func=cmd_read)
