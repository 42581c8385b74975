"""`cumulus maintenance`: expire old snapshots (tags and the retention keep theirs) and
compact base layers, map deltas and small files in every table of the home (cumulus/store/maintenance.py); the
retention defaults come from `[pipeline]` in cumulus.toml."""

from __future__ import annotations

import argparse
import sys

from cumulus.config import settings_from_args
from cumulus.output import FORMATS, render


def cmd_maintenance(args: argparse.Namespace) -> int:
    from cumulus.pipeline.config import load_pipeline_config, parse_duration
    from cumulus.spark.session import spark_session
    from cumulus.store.maintenance import maintain

    settings = settings_from_args(args)
    cfg = load_pipeline_config(settings.home)
    spark = spark_session(settings, app_name="cumulus-maintenance")
    reports = maintain(
        spark, settings,
        retain_last=args.retain_last or cfg.retain_last,
        retain_for=parse_duration(args.retain_for, "--retain-for") if args.retain_for else cfg.retain_for,
        expire=not args.no_expire,
        compact=cfg.compact if args.compact is None else args.compact,
        target_file_size_mb=cfg.target_file_size_mb,
        tables=[f"{settings.catalog}.{t}" for t in args.table] if args.table else None,
    )
    columns = ["table", "snapshots_before", "snapshots_after", "tags", "data_files_deleted",
               "files_rewritten", "files_added", "delete_files_removed", "layer_rows_compacted", "delta_rows_compacted",
               "seconds"]
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
    p.add_argument("--retain-last", type=int, dest="retain_last", help="snapshots kept per table (default [pipeline] retain_last, 5)")
    p.add_argument("--retain-for", dest="retain_for", help="keep snapshots younger than this, e.g. 7d, 0s (default [pipeline] retain_for)")
    p.add_argument("--no-expire", action="store_true", help="do not expire snapshots")
    compact = p.add_mutually_exclusive_group()
    compact.add_argument("--compact", dest="compact", action="store_true", default=None, help="compact small files")
    compact.add_argument("--no-compact", dest="compact", action="store_false", help="do not compact")
    p.add_argument("--table", action="append", help="only this table, e.g. maps.entries (repeatable)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.set_defaults(func=cmd_maintenance)
