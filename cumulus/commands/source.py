"""`cumulus source add|remove|list`: the home's sources, declared in cumulus.toml."""

from __future__ import annotations

import argparse
import sys

from cumulus.commands import engine_for
from cumulus.config import settings_from_args
from cumulus.ingest.sources import load_sources
from cumulus.output import FORMATS, render


def cmd_add(args: argparse.Namespace) -> int:
    src = engine_for(args).add_source(args.name, args.priority, args.landing, args.max_error_rate)
    print(f"source {src.name}: priority {src.priority}, landing {src.landing}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    source = engine_for(args).remove_source(args.name)
    print(f"source {source.name} removed (priority {source.priority}); its landing folder {source.landing} "
          "and its past events are kept")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    sources = sorted(load_sources(settings_from_args(args)).values(), key=lambda s: s.priority)
    rows = [(s.name, s.priority, str(s.landing), s.max_error_rate) for s in sources]
    sys.stdout.write(render(["source", "priority", "landing", "max_error_rate"], rows, args.format))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("source", help="declare and list sources (producers of events)")
    sub = p.add_subparsers(dest="source_command", metavar="SUBCOMMAND")
    sub.required = True
    add = sub.add_parser(
        "add",
        help="declare a source",
        description="Declare a source in the home's cumulus.toml: a name, a unique fixed "
        "priority (the source_id of its events' versions) and a landing folder.",
    )
    add.add_argument("name", help="lowercase letters, digits, _ or -")
    add.add_argument("--priority", type=int, required=True, help="unique integer, 0 to 2^31-1")
    add.add_argument("--landing", help="landing folder (default <home>/landing/<name>)")
    add.add_argument("--max-error-rate", type=float, dest="max_error_rate",
                     help="fail a batch whose rejected share passes this (default [ingest] max_error_rate, 0.5)")
    add.set_defaults(func=cmd_add)
    rm = sub.add_parser(
        "remove",
        help="remove a source",
        description="Take a source out of the home's cumulus.toml. Refused while it has ingested "
        "batches in an epoch not closed yet (close it first). Its landing folder and past events stay.",
    )
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)
    ls = sub.add_parser("list", help="list the sources")
    ls.add_argument("--format", choices=FORMATS, default="table")
    ls.set_defaults(func=cmd_list)
