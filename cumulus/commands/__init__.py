"""The CLI's subcommands, one module per area; each calls the engine library."""

from __future__ import annotations

import argparse

from cumulus.config import settings_from_args


def engine_for(args: argparse.Namespace):
    """The home's engine (cumulus.app.Engine) for a command: --home, its Spark app name."""
    from cumulus.app import Engine

    return Engine(settings_from_args(args), app_name=f"cumulus {args.command}")
