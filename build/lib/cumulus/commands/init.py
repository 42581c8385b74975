"""`cumulus init`: fix a home's schema and create its Iceberg tables and epoch 1."""

from __future__ import annotations

import argparse

from cumulus.config import settings_from_args


def cmd_init(args: argparse.Namespace) -> int:
    from cumulus.app import Engine

    engine, result = Engine.init(settings_from_args(args, require_home=False).home, args.schema)
    settings = engine.settings
    verb = "initialized" if result.created else "already initialized (same schema): checked"
    print(f"{settings.home}: {verb}")
    print(f"relations: {', '.join(result.schema.names)}")
    print(f"open epoch: {result.epoch}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "init",
        help="initialize a home: schema, Iceberg tables, epoch 1",
        description="Copy the schema into the home (schema.sql) and create the namespaces "
        "events, base, maps, cumulus with events.<rel>, base.<rel>, cumulus.files, "
        "cumulus.quarantine and cumulus.ledger; open epoch 1. Running it again with the same "
        "schema changes nothing; another schema is refused.",
    )
    p.add_argument("--schema", required=True, help="SQL DDL file (CREATE TABLE statements)")
    p.set_defaults(func=cmd_init)
