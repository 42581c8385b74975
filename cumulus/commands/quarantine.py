"""`cumulus quarantine list|show`: rejected input rows and why (PyIceberg, no JVM)."""

from __future__ import annotations

import argparse
import sys

from cumulus.config import settings_from_args
from cumulus.errors import NotFoundError
from cumulus.output import FORMATS, render
from cumulus.store.catalog import pyiceberg_catalog


def cmd_list(args: argparse.Namespace) -> int:
    from cumulus.store.quarantine import LIST_COLUMNS, list_rows

    settings = settings_from_args(args)
    rows = list_rows(pyiceberg_catalog(settings), settings, args.epoch, args.source, args.reason)
    total = len(rows)
    if args.limit is not None:
        rows = rows[: args.limit]
    sys.stdout.write(render(list(LIST_COLUMNS), [tuple(r[c] for c in LIST_COLUMNS) for r in rows], args.format))
    if args.format == "table" and total > len(rows):
        sys.stdout.write(f"({total - len(rows)} more; raise --limit)\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from cumulus.ingest.validate import REASONS
    from cumulus.store.quarantine import get_row

    settings = settings_from_args(args)
    row = get_row(pyiceberg_catalog(settings), settings, args.id)
    if row is None:
        raise NotFoundError(f"no quarantine row {args.id} (see `cumulus quarantine list`)")
    if args.format != "table":
        sys.stdout.write(render(list(row), [tuple(row.values())], args.format))
        return 0
    width = max(len(k) for k in row)
    for key, value in row.items():
        sys.stdout.write(f"{key.ljust(width)}  {'' if value is None else value}\n")
    sys.stdout.write(f"{'meaning'.ljust(width)}  {REASONS.get(row['reason'], '')}\n")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("quarantine", help="rejected input rows")
    sub = p.add_subparsers(dest="quarantine_command", metavar="SUBCOMMAND")
    sub.required = True
    ls = sub.add_parser("list", help="list quarantined rows")
    ls.add_argument("--epoch", type=int)
    ls.add_argument("--source")
    ls.add_argument("--reason", help="a reason code, e.g. bad_value")
    ls.add_argument("--limit", type=int, default=100, help="rows to print (default 100)")
    ls.add_argument("--format", choices=FORMATS, default="table")
    ls.set_defaults(func=cmd_list)
    show = sub.add_parser("show", help="one quarantined row, with its raw text")
    show.add_argument("id", type=int)
    show.add_argument("--format", choices=FORMATS, default="table")
    show.set_defaults(func=cmd_show)
