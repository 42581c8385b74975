"""`cumulus maintenance`: expire old snapshots (tags and the retention keep theirs) and
compact base layers, map deltas and small files in every table of the home (cumulus/store/maintenance.py); the
retention defaults come from `[pipeline]` in cumulus.toml."""

from __future__ import annotations

import argparse
import sys

from cumulus.commands import engine_for
from cumulus.jobs import maintenance_arguments, maintenance_options
from cumulus.output import FORMATS, maintenance_text


def cmd_maintenance(args: argparse.Namespace) -> int:
    sys.stdout.write(maintenance_text(engine_for(args).maintain(**maintenance_options(args)), args.format))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "maintenance",
        help="expire snapshots no tag or retention keeps; compact base layers and small files",
        description="For every table of the home: rewrite each base table that has fold "
        "layers as one row per live tuple, rewrite small data files (Iceberg "
        "rewrite_data_files) and expire snapshots (expire_snapshots). Tagged snapshots "
        "(epoch-N), the newest --retain-last, those younger than --retain-for and those an "
        "unclosed epoch may still need are kept. Defaults from [pipeline] in cumulus.toml.",
    )
    maintenance_arguments(p)
    p.add_argument("--format", choices=FORMATS, default="table")
    p.set_defaults(func=cmd_maintenance)
