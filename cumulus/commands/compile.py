"""`cumulus compile VIEW.sql... --schema SCHEMA.sql`: print the M3 program of views."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cumulus.commands import engine_for
from cumulus.commands.inputs import add_dialect_option, compile_files, read_views
from cumulus.commands.m3 import describe
from cumulus.schema import load_schema
from cumulus.sql.estimate import Statistics
from cumulus.sql.explain import explain


def cmd_compile(args: argparse.Namespace) -> int:
    compiled = compile_files(args.views, args.schema, args.dialect)
    sys.stdout.write(compiled.text())
    if args.check:
        sys.stdout.write("\n" + "".join(f"-- {line}\n" for line in describe(compiled.checked, compiled.sharing()).splitlines()))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    schema = load_schema(args.schema)
    stats = Statistics.load(args.stats) if args.stats else home_statistics(args, schema) if args.from_home else None
    if stats is not None and args.save_stats:
        Path(args.save_stats).write_text(stats.to_json())
    sys.stdout.write(explain(schema, read_views(args.views), args.dialect, stats))
    return 0


def home_statistics(args: argparse.Namespace, schema):
    """The home's base.* statistics at its latest closed epoch (a Spark job per relation)."""
    return engine_for(args).statistics({r.name: r.column_names for r in schema.relations})


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compile",
        help="compile SQL aggregate views to an M3 trigger program",
        description="Compile one or more SQL views (one SELECT per file; the view is named "
        "after its file) into one M3 program; maps with equal definitions are shared.",
    )
    p.add_argument("views", nargs="+", help="view files (SQL)")
    p.add_argument("--schema", required=True, help="SQL DDL file declaring the relations")
    p.add_argument("--check", action="store_true", help="also print maps, depths, sharing and the dataflow")
    add_dialect_option(p)
    p.set_defaults(func=cmd_compile)
    e = subparsers.add_parser(
        "explain",
        help="how views are maintained: per column, the maps, what is computed at read time, or why refused",
        description="Explain each view (one SELECT per file, named after its file; the views compiled "
        "together, so shared maps show): its groups, how each column is kept (a map updated by every "
        "event's deltas) or computed at read time (AVG, MIN, MAX), the maps it reads and those kept for "
        "it, shared ones with the views they serve; for a refused view, the construct that blocks it "
        "and where.",
    )
    e.add_argument("views", nargs="+", help="view files (SQL)")
    e.add_argument("--schema", required=True, help="SQL DDL file declaring the relations")
    e.add_argument("--stats", metavar="FILE",
                   help='base relations\' statistics (JSON: {"lineitem": {"rows": 6001215, "distinct": '
                        '{"l_orderkey": 1500000}}, ...}): each map\'s estimated entries and the view\'s total')
    e.add_argument("--from-home", action="store_true",
                   help="the statistics of the home's base.* at its latest closed epoch (starts Spark)")
    e.add_argument("--save-stats", metavar="FILE", help="also write the statistics used to FILE (JSON)")
    add_dialect_option(e)
    e.set_defaults(func=cmd_explain)
