"""`cumulus interpret`: replay an event folder through the reference interpreter and
print every map (or one), or a view's rows, as CSV."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from cumulus.commands.inputs import add_dialect_option, compile_files, load_program, view_name
from cumulus.errors import CumulusError
from cumulus.ingest.dbtoaster import read_stream
from cumulus.m3.interpreter import Interpreter
from cumulus.output import render, sort_key
from cumulus.sql.derived import Maintainer
from cumulus.sql.views import view_rows

log = logging.getLogger("cumulus.interpret")


def cmd_interpret(args: argparse.Namespace) -> int:
    if bool(args.program) == bool(args.view):
        raise CumulusError("give exactly one of --program PROGRAM.m3 or --view VIEW.sql")
    if args.view:
        compiled = compile_files([args.view], args.schema, args.dialect)
        checked, schema = compiled.checked, compiled.schema
    else:
        checked = load_program(args.program, args.schema)
        schema = checked.schema
    rows = read_stream(args.events, schema)
    log.info("replaying %d events from %s", len(rows), args.events)
    started = time.perf_counter()
    # A view's nested queries: their derived relations kept after every event.
    interp: Interpreter | Maintainer = Maintainer(compiled) if args.view else Interpreter(checked)
    for i, row in enumerate(rows, 1):
        try:
            interp.process(row.event)
        except CumulusError as exc:
            raise CumulusError(f"{row.file}:{row.line}: {exc}") from None
        if i % 5000 == 0:
            log.info("%d/%d events", i, len(rows))
    log.info("done in %.2f s", time.perf_counter() - started)

    if args.view:
        plan = compiled.views[view_name(args.view)]
        result = plan.presented(view_rows(plan, interp.entries))
        sys.stdout.write(render(plan.column_names, result, args.format))
        return 0
    names = [args.map.lower()] if args.map else list(checked.maps)
    for name in names:
        if name not in checked.maps:
            raise CumulusError(f"the program has no map {name} (maps: {', '.join(checked.maps)})")
        info = checked.maps[name]
        entries = sorted((k + (v,) for k, v in interp.entries(name).items()), key=sort_key)
        if len(names) > 1:
            sys.stdout.write(f"# map {name}\n")
        sys.stdout.write(render(list(info.key_names) + ["value"], entries, args.format))
        if len(names) > 1:
            sys.stdout.write("\n")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "interpret",
        help="replay an event stream through the reference interpreter",
        description="Replay a folder of events (one <relation>.csv, .dat or .tbl per relation, DBToaster "
        "format: event-order number, 1 insert / 0 delete, then the tuple; static files "
        "without those columns load first) and print the maps or a view's rows.",
    )
    p.add_argument("--schema", required=True, help="SQL DDL file declaring the relations")
    p.add_argument("--program", help="an M3 program file")
    p.add_argument("--view", help="a SQL view file (compiled first)")
    add_dialect_option(p)
    p.add_argument("--events", required=True, help="folder of event files")
    p.add_argument("--input-format", dest="input_format", default="dbtoaster", choices=["dbtoaster"],
                   help="format of the event folder (default dbtoaster)")
    p.add_argument("--format", default="csv", choices=["csv", "table", "json"], help="output format (default csv)")
    p.add_argument("--map", help="print only this map (with --program)")
    p.set_defaults(func=cmd_interpret)
