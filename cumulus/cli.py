"""The `cumulus` command line: a global `--home` option and one subcommand module per
area (cumulus/commands/*.py, each with `register(subparsers)`)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from cumulus.errors import CumulusError

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
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines are noise
    try:
        return int(args.func(args) or 0)
    except CumulusError as exc:
        print(f"cumulus: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
