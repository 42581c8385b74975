"""`cumulus maintenance`: expire old snapshots (tags and the retention keep theirs) and
compact base layers, map deltas and small files in every table of the home (cumulus/store/maintenance.py); the
retention defaults come from `[pipeline]` in cumulus.toml."""

from __future__ import annotations

import argparse
import sys

from cumulus.output import FORMATS, render


def cmd_maintenance(args: argparse.Namespace) -> int:
    from cumulus.commands import engine_for

    return maintain(engine_for(args), args)


def maintain(engine, args: argparse.Namespace) -> int:
    """Run maintenance with the options of `add_arguments` (defaults from [pipeline])."""
    from cumulus.pipeline.config import load_pipeline_config, parse_duration

    settings = engine.settings
    cfg = load_pipeline_config(settings.home)
    reports = engine.maintain(
        retain_last=args.retain_last or cfg.retain_last,
        retain_for=parse_duration(args.retain_for, "--retain-for") if args.retain_for else cfg.retain_for,
        expire=not args.no_expire,
        compact=cfg.compact if args.compact is None else args.compact,
        target_file_size_mb=cfg.target_file_size_mb,
        tables=[f"{settings.catalog}.{t}" for t in args.table] if args.table else None,
    )
    columns = ["table", "snapshots_before", "snapshots_after", "tags", "data_files_deleted",
               "files_rewritten", "files_added", "delete_files_removed", "layer_rows_compacted", "delta_rows_compacted",
               "log_rows_compacted", "seconds"]
    sys.stdout.write(render(columns, [tuple(getattr(r, c) for c in columns) for r in reports], args.format))
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
    add_arguments(p)
    p.set_defaults(func=cmd_maintenance)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retain-last", type=int, dest="retain_last", help="snapshots kept per table (default [pipeline] retain_last, 5)")
    p.add_argument("--retain-for", dest="retain_for", help="keep snapshots younger than this, e.g. 7d, 0s (default [pipeline] retain_for)")
    p.add_argument("--no-expire", action="store_true", help="do not expire snapshots")
    compact = p.add_mutually_exclusive_group()
    compact.add_argument("--compact", dest="compact", action="store_true", default=None, help="compact small files")
    compact.add_argument("--no-compact", dest="compact", action="store_false", help="do not compact")
    p.add_argument("--table", action="append", help="only this table, e.g. maps.entries (repeatable)")
    p.add_argument("--format", choices=FORMATS, default="table")
