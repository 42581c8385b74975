"""`cumulus epoch status`: the open epoch and the ledger (read with PyIceberg, no JVM)."""

from __future__ import annotations

import argparse
import sys

from cumulus.commands import engine_for
from cumulus.config import settings_from_args
from cumulus.engine.metrics import human_bytes
from cumulus.errors import CumulusError, NoSuchEpochError
from cumulus.output import FORMATS, closed_text, render
from cumulus.store.catalog import pyiceberg_catalog

COLUMNS = ["epoch", "state", "opened_at", "sealed_at", "closed_at", "published_at",
           "events", "rejected", "files", "batches", "validation"]


def cmd_status(args: argparse.Namespace) -> int:
    from cumulus.store.files import epoch_counts
    from cumulus.store.ledger import APPLIED, CLOSED, FAILED, OPEN, current_epoch, ledger_rows

    settings = settings_from_args(args)
    catalog = pyiceberg_catalog(settings)
    rows = ledger_rows(catalog, settings)
    current = current_epoch(catalog, settings)
    table = []
    for row in rows:
        values = {name: getattr(row, name) for name in COLUMNS}
        if row.state == OPEN:  # live counts of the open epoch, from the manifest
            values.update({k: v for k, v in epoch_counts(catalog, settings, row.epoch).items() if k in values})
        table.append(tuple(values[c] for c in COLUMNS))
    if args.format == "table":
        from cumulus.engine.publish import stable_epoch

        shown = stable_epoch(settings, rows)
        sys.stdout.write(f"current epoch: {current}\n")
        sys.stdout.write(f"stable epoch: {shown.epoch if shown else 'none yet'} (views_stable.*, the stable branch; "
                         f"publish = {settings.publish})\n")
        for row in rows:
            if row.state == APPLIED:
                sys.stdout.write(f"epoch {row.epoch} is sealed but not closed (an interrupted close): "
                                 f"cumulus --home {settings.home} epoch close resumes it\n")
            elif row.state == FAILED:
                sys.stdout.write(f"epoch {row.epoch} failed validation and holds every later epoch from stable: "
                                 f"repair it and validate it again, or cumulus --home {settings.home} epoch publish "
                                 f"{row.epoch} --accept-failed --reason TEXT ({row.validation_detail or ''})\n")
            elif row.state == CLOSED and row.validation:
                sys.stdout.write(f"epoch {row.epoch} passed validation and is held until every epoch before it "
                                 "is published\n")
    sys.stdout.write(render(COLUMNS, table, args.format))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """One epoch's ledger row: state, times, counts, validation, and every metric."""
    from cumulus.store.ledger import ledger_row, ledger_rows

    settings = settings_from_args(args)
    catalog = pyiceberg_catalog(settings)
    if args.epoch is not None and args.epoch_option is not None and args.epoch != args.epoch_option:
        raise CumulusError(f"two epochs given: {args.epoch} and --epoch {args.epoch_option}")
    epoch = args.epoch if args.epoch is not None else args.epoch_option
    if epoch is None:
        epoch = max((r.epoch for r in ledger_rows(catalog, settings)), default=0)
        print(f"cumulus: showing epoch {epoch} (the newest in the ledger)", file=sys.stderr, flush=True)
    row = ledger_row(catalog, settings, epoch)
    if row is None:
        raise NoSuchEpochError(f"epoch {epoch} is not in the ledger (cumulus epoch status)")
    items = [(name, getattr(row, name)) for name in COLUMNS + ["validation_detail", "late_files"]]
    for key, value in sorted((row.metrics or {}).items()):
        shown = f"{value} ({human_bytes(value)})" if key.endswith("bytes_read") or key.endswith("bytes_written") else value
        items.append((f"metrics.{key}", shown if args.format == "table" else value))
    items.append(("tagged_tables", len(row.snapshots or {})))
    sys.stdout.write(render(["field", "value"], items, args.format))
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish what passed (in order), or accept a failed epoch first."""
    stable = engine_for(args).publish(args.epoch, args.accept_failed, args.reason or "")
    print(f"stable epoch: {stable if stable is not None else 'none yet'}")
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    def say(line: str) -> None:  # which epoch a close without --epoch took, and why
        print(f"cumulus: {line}", file=sys.stderr, flush=True)

    epoch, metrics = engine_for(args).close(args.epoch, progress=say, rebuild_maps=args.rebuild)
    sys.stdout.write(closed_text(epoch, metrics, args.format))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("epoch", help="epochs: the ledger")
    sub = p.add_subparsers(dest="epoch_command", metavar="SUBCOMMAND")
    sub.required = True
    st = sub.add_parser("status", help="the open epoch and every ledger row")
    st.add_argument("--format", choices=FORMATS, default="table")
    st.set_defaults(func=cmd_status)
    show = sub.add_parser("show", help="one epoch's ledger row with its metrics (time, rows and bytes per step)")
    show.add_argument("epoch", type=int, nargs="?", help="the epoch (default: the newest); or --epoch N")
    show.add_argument("--epoch", type=int, dest="epoch_option", metavar="N", help="the epoch, as every command takes it")
    show.add_argument("--format", choices=FORMATS, default="table")
    show.set_defaults(func=cmd_show)
    close = sub.add_parser(
        "close",
        help="seal the open epoch, apply what is pending, repair, fold, compact past a ratio, tag epoch-N",
        description="Close an epoch: afterwards every map and base table carries the tag "
        "epoch-N and the ledger row says closed. Safe to rerun after a crash: without --epoch "
        "a rerun resumes the interrupted close before it seals anything new. Epochs close in "
        "order; closing one while an earlier one is not closed is refused.",
    )
    close.add_argument(
        "--epoch", type=int,
        help="the epoch (default: the oldest one sealed but not closed, i.e. an interrupted close; "
        "else the open one)",
    )
    close.add_argument(
        "--rebuild", action="store_true",
        help="rebuild every map from base.* at this close, whatever epoch_mode says: corrects maps an older "
             "Cumulus wrote wrong (docs/engine.md, 'Rebuilding the maps'); costs what recomputing every view costs",
    )
    close.add_argument("--format", choices=FORMATS, default="table")
    close.set_defaults(func=cmd_close)
    pub = sub.add_parser(
        "publish",
        help="publish the epochs that passed validation, in order; or accept a failed one",
        description="An epoch is published (the stable branch, views_stable.*, the Airflow asset and "
        "dbt move to it) once it passed validation and every epoch before it is published. A failed "
        "epoch holds the later ones: repair it and validate it again, or publish it as it is with "
        "--accept-failed and a --reason, kept in its ledger row. Without options: publish what is due "
        "(after a crash between a validation and its publication).",
    )
    pub.add_argument("epoch", type=int, nargs="?", help="the failed epoch to accept (with --accept-failed)")
    pub.add_argument("--accept-failed", dest="accept_failed", action="store_true",
                     help="publish the failed epoch as it is")
    pub.add_argument("--reason", help="why it is accepted (required with --accept-failed; kept in the ledger)")
    pub.set_defaults(func=cmd_publish)
