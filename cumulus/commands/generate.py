"""`cumulus generate tpch`: a TPC-H event stream in landing folders (two sources, one
folder per epoch; cumulus/ingest/tpch_stream.py) for the demo, tests and benchmarks."""

from __future__ import annotations

import argparse
import sys

from cumulus.ingest.tpch_stream import generate
from cumulus.output import FORMATS, render


def cmd_tpch(args: argparse.Namespace) -> int:
    manifest = generate(args.scale, args.epochs, args.fraction, args.out, args.seed,
                        customers_per_epoch=args.customers)
    rows = []
    for b in sorted(manifest.batches, key=lambda b: (b.epoch, manifest.sources[b.source])):
        ins = " ".join(f"{r}+{n}" for r, n in sorted(b.inserts.items()))
        dels = " ".join(f"{r}-{n}" for r, n in sorted(b.deletes.items()))
        rows.append((b.epoch, b.source, b.folder, ins, dels))
    sys.stdout.write(render(["epoch", "source", "folder", "inserts", "deletes"], rows, args.format))
    if args.format == "table":
        print(f"\nstream in {manifest.root} (manifest.json). Declare its sources in a home:")
        for name, prio in sorted(manifest.sources.items(), key=lambda kv: kv[1]):
            print(f"  cumulus --home H source add {name} --priority {prio} --landing {manifest.root / name}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("generate", help="generate test input (a TPC-H event stream)")
    sub = p.add_subparsers(dest="generate_command", metavar="SUBCOMMAND")
    sub.required = True
    t = sub.add_parser(
        "tpch",
        help="TPC-H tables from tpchgen-cli as an epoch-by-epoch stream of inserts and deletes",
        description="Write OUT/<source>/epoch-N/ landing folders (DBToaster .tbl files and a "
        "_SUCCESS marker) for the sources sales (orders, lineitem; priority 1) and catalog "
        "(the other relations; priority 2). Epoch 1 is the initial load; each later epoch "
        "inserts new orders with their line items and deletes live ones, changing about "
        "FRACTION of lineitem, and adds a few customers. Deterministic for a seed.",
    )
    t.add_argument("--scale", type=float, default=0.01, help="TPC-H scale factor (default 0.01)")
    t.add_argument("--epochs", type=int, default=3, help="number of epochs (default 3)")
    t.add_argument("--fraction", type=float, default=0.001,
                   help="share of lineitem changed per later epoch (default 0.001 = 0.1%%)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--customers", type=int, default=2, help="customers inserted per later epoch (default 2)")
    t.add_argument("--out", required=True, help="output folder (its epoch folders are replaced)")
    t.add_argument("--format", choices=FORMATS, default="table")
    t.set_defaults(func=cmd_tpch)
