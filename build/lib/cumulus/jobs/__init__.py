"""The pipeline's Spark steps as modules: each one's `main(argv)` parses its arguments,
opens the home's `cumulus.app.Engine` and runs one workflow of it, printing what the CLI
prints (cumulus.output). Nothing else here: the application layer does the work.

    python -m cumulus.jobs.ingest --home H --source S [PATH...]
    python -m cumulus.jobs.apply --home H --source S [--epoch N]
    python -m cumulus.jobs.close --home H [--epoch N]
    python -m cumulus.jobs.validate --home H [--epoch N]
    python -m cumulus.jobs.maintenance --home H [--retain-last N]

spark-submit takes a file, not a module: it runs the module's own file (the operator
passes `job_file(job)`), or the repository's spark_jobs/<job>.py, which calls the same
main. Exit status 0 on success, 1 a failed validation, 2 a Cumulus error
(cumulus.errors.ExitCode)."""

from __future__ import annotations

import argparse
from pathlib import Path

JOB_NAMES = ("ingest", "apply", "close", "validate", "maintenance")


def check_job(job: str) -> str:
    """`job` if it names a Spark step; ValueError otherwise."""
    if job not in JOB_NAMES:
        raise ValueError(f"unknown Cumulus Spark job {job!r} (jobs: {', '.join(JOB_NAMES)})")
    return job


def job_file(job: str) -> Path:
    """The file spark-submit runs for `job`: the job's module, inside the installed package."""
    return Path(__file__).resolve().parent / f"{check_job(job)}.py"


def job_parser(job: str, doc: str) -> argparse.ArgumentParser:
    """A job's parser: its program name, its doc's first line, and --home."""
    parser = argparse.ArgumentParser(prog=f"python -m cumulus.jobs.{job}", description=doc.strip().splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    return parser


def ingest_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of an ingest (the job's and `cumulus ingest`'s)."""
    from cumulus.ingest.formats import FORMATS

    p.add_argument("--source", required=True, help="the source (see `cumulus source list`)")
    p.add_argument("--input-format", dest="input_format", choices=FORMATS,
                   help="the files' format (default: from each file's extension)")
    p.add_argument("--relation", help="the relation of every file (default: from each file's name)")
    p.add_argument("paths", nargs="*", help="files or folders (default: the source's landing folder)")


def maintenance_arguments(p: argparse.ArgumentParser) -> None:
    """The options of maintenance (the job's and `cumulus maintenance`'s); unset ones take
    the home's [pipeline] retention (Engine.maintain)."""
    p.add_argument("--retain-last", type=int, dest="retain_last", help="snapshots kept per table (default [pipeline] retain_last, 5)")
    p.add_argument("--retain-for", dest="retain_for", help="keep snapshots younger than this, e.g. 7d, 0s (default [pipeline] retain_for)")
    p.add_argument("--no-expire", action="store_true", help="do not expire snapshots")
    compact = p.add_mutually_exclusive_group()
    compact.add_argument("--compact", dest="compact", action="store_true", default=None, help="compact small files")
    compact.add_argument("--no-compact", dest="compact", action="store_false", help="do not compact")
    p.add_argument("--table", action="append", help="only this table, e.g. maps.entries (repeatable)")


def maintenance_options(args: argparse.Namespace) -> dict:
    """Engine.maintain's keyword arguments from `maintenance_arguments`."""
    return {"retain_last": args.retain_last, "retain_for": args.retain_for, "expire": not args.no_expire,
            "compact": args.compact, "tables": args.table}
