"""`cumulus ingest`: take a source's landing files into the open epoch (a Spark job;
cumulus.jobs.ingest runs the same with spark-submit)."""

from __future__ import annotations

import argparse
import sys

from cumulus.commands import engine_for
from cumulus.errors import IngestError
from cumulus.jobs import ingest_arguments
from cumulus.output import ingest_text


def cmd_ingest(args: argparse.Namespace) -> int:
    try:
        report = engine_for(args).ingest(args.source, args.paths or None, args.input_format, args.relation)
    except IngestError as exc:
        if exc.report is not None:
            sys.stdout.write(ingest_text(exc.report))
        raise
    sys.stdout.write(ingest_text(report))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="ingest landing files of a source into the open epoch",
        description="Parse, validate, version and append a source's files to events.* as "
        "one batch (one Iceberg commit per relation); rejected rows go to cumulus.quarantine. "
        "A file (by content) is taken once, ever. Exits non-zero when the source's error rate "
        "passes its max_error_rate (then nothing of the batch is applied).",
    )
    ingest_arguments(p)
    p.set_defaults(func=cmd_ingest)
