"""Spark job: close an epoch (seal, apply what is pending, repair, fold, compact past a
ratio, tag epoch-N, ledger `closed`), then complete its ledger row with the input counts of
the file manifest and the late files (folders of the pipeline's landing layout that
missed the epoch; cumulus.pipeline.epochs.late_entries).

    python spark_jobs/close.py --home H [--epoch N]
    spark-submit --master 'local[2]' $JARS spark_jobs/close.py --home H --epoch N

`cumulus --home H epoch close [--epoch N]` plus that record (jars: see
spark_jobs/ingest.py). Safe to rerun: a closed epoch is left as it is and its record
rewritten with the same values. Exit status 0 on success, 2 on a Cumulus error.
"""

from __future__ import annotations

import argparse
import logging
import sys

log = logging.getLogger("cumulus.pipeline.close")


def record(engine, epoch: int) -> dict:
    """Counts and late files of a closed epoch into its ledger row (idempotent)."""
    from cumulus.pipeline.config import load_pipeline_config
    from cumulus.pipeline.epochs import CLOSED, late_entries
    from cumulus.store.files import epoch_counts
    from cumulus.store.ledger import ledger_row, transition

    spark, settings = engine.spark, engine.settings
    row = ledger_row(spark, settings, epoch)
    if row is None or row.state != CLOSED:
        return {}
    counts = epoch_counts(spark, settings, epoch)
    late = late_entries(spark, settings, load_pipeline_config(settings.home), epoch)
    fields = {k: counts[k] for k in ("events", "rejected", "files", "batches")}
    transition(spark, settings, epoch, CLOSED, late_files=late or None, **fields)
    for entry in late:
        log.warning("epoch %d source %s: %s folder %s (%s)", epoch, entry["source"], entry["kind"],
                    entry["folder"], ", ".join(entry["files"]) or "no files")
    return fields


def main(argv: list[str] | None = None) -> int:
    from cumulus.app import Engine, run_step
    from cumulus.commands.epoch import print_closed

    parser = argparse.ArgumentParser(prog="spark_jobs/close.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="Cumulus home (default $CUMULUS_HOME or ./.cumulus)")
    parser.add_argument("--epoch", type=int, help="the epoch (default: an interrupted close's, else the open one)")
    args = parser.parse_args(argv)

    def step() -> None:
        engine = Engine.open(args.home, app_name="cumulus-close")
        epoch, metrics = engine.close(args.epoch, progress=lambda line: print(line, flush=True))
        print_closed(epoch, metrics, "table")
        print(f"epoch {epoch}: recorded {record(engine, epoch)}")

    return run_step(step)


if __name__ == "__main__":
    sys.exit(main())
