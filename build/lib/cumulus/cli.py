"""The `cumulus` command line: a global `--home` option and one subcommand module per
area (cumulus/commands/*.py, each with `register(subparsers)`)."""

from __future__ import annotations

import argparse
import importlib
import sys

from cumulus import __version__

# Each module registers its subcommands; the handler is stored as `func` on the parser.
COMMAND_MODULES = [
    "cumulus.commands.m3",
    "cumulus.commands.compile",
    "cumulus.commands.interpret",
    "cumulus.commands.sql",
    "cumulus.commands.views",
    "cumulus.commands.init",
    "cumulus.commands.source",
    "cumulus.commands.ingest",
    "cumulus.commands.epoch",
    "cumulus.commands.quarantine",
    "cumulus.commands.dbt",
    "cumulus.commands.sqlserver",
    "cumulus.commands.quality",
    "cumulus.commands.generate",
    "cumulus.commands.maintenance",
    "cumulus.commands.engine",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cumulus",
        description="Incrementally maintained SQL aggregate views on Apache Iceberg.",
    )
    parser.add_argument(
        "--home",
        help="Cumulus home folder (catalog, warehouse, config); default $CUMULUS_HOME or ./.cumulus",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--debug", action="store_true", help="on an error, print its traceback too")
    parser.add_argument("--version", action="version", version=f"cumulus {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import run_step

    args = build_parser().parse_args(argv)
    return run_step(lambda: args.func(args), verbose=args.verbose, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
