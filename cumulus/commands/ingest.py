"""`cumulus ingest`: take a source's landing files into the open epoch (a Spark job;
spark_jobs/ingest.py runs the same with spark-submit)."""

from __future__ import annotations

import argparse
import sys

from cumulus.errors import IngestError
from cumulus.output import render


def cmd_ingest(args: argparse.Namespace) -> int:
    from cumulus.commands import engine_for

    try:
        report = engine_for(args).ingest(args.source, args.paths or None, args.input_format, args.relation)
    except IngestError as exc:
        if exc.report is not None:
            print_report(exc.report)
        raise
    print_report(report)
    return 0


def print_report(report) -> None:
    out = sys.stdout
    if report.relations:
        out.write(render(*report.relation_rows(), "table"))
    if report.files:
        out.write(render(*report.file_rows(), "table"))
    if report.recovered:
        out.write(f"rolled back first: {len(report.recovered)} incomplete batch(es): {', '.join(report.recovered)}\n")
    if report.epoch is None:
        out.write(f"source {report.source}: no files to ingest\n")
    else:
        out.write(report.headline() + "\n")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cumulus.ingest.formats import FORMATS

    p.add_argument("--source", required=True, help="the source (see `cumulus source list`)")
    p.add_argument("--input-format", dest="input_format", choices=FORMATS,
                   help="the files' format (default: from each file's extension)")
    p.add_argument("--relation", help="the relation of every file (default: from each file's name)")
    p.add_argument("paths", nargs="*", help="files or folders (default: the source's landing folder)")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="ingest landing files of a source into the open epoch",
        description="Parse, validate, version and append a source's files to events.* as "
        "one batch (one Iceberg commit per relation); rejected rows go to cumulus.quarantine. "
        "A file (by content) is taken once, ever. Exits non-zero when the source's error rate "
        "passes its max_error_rate (then nothing of the batch is applied).",
    )
    add_arguments(p)
    p.set_defaults(func=cmd_ingest)
