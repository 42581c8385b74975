"""A TPC-H event stream in landing folders: the input of the pipeline's demo, its tests
and the benchmark. `tpchgen-cli` makes the tables at a scale factor; they become one
landing folder per epoch and source:

    OUT/manifest.json                   what was written (Manifest.load reads it back)
    OUT/sales/epoch-1/orders.tbl        epoch 1: the initial load (static DBToaster rows)
    OUT/sales/epoch-1/lineitem.tbl
    OUT/sales/epoch-1/_SUCCESS          the ready marker, written last
    OUT/catalog/epoch-1/{nation,region,part,supplier,partsupp,customer}.tbl
    OUT/sales/epoch-2/orders.tbl        later epochs: DBToaster events `n|1|tuple` (insert)
    OUT/sales/epoch-2/lineitem.tbl        and `n|0|tuple` (delete); an order and its line
    OUT/catalog/epoch-2/customer.tbl      items share the event-order number n

Two sources: `sales` (priority 1: orders, lineitem) and `catalog` (priority 2: the
other six relations). Each later epoch inserts new orders with their line items (fresh
order keys, copied from a random template order, for a random live customer) and deletes
live orders with all their line items, so that about `fraction` of lineitem changes per
epoch, half inserts, half deletes; the catalog inserts a few new customers (that later
orders may use). Everything follows from the seed: the same arguments write the same
bytes. Memory holds the keys plus the lines of the orders the stream touches, not the
tables, so larger scale factors work for the benchmark.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cumulus.errors import ConfigError

log = logging.getLogger("cumulus.generate")

SALES, CATALOG = "sales", "catalog"
SOURCES: dict[str, tuple[int, tuple[str, ...]]] = {
    SALES: (1, ("orders", "lineitem")),
    CATALOG: (2, ("nation", "region", "part", "supplier", "partsupp", "customer")),
}
RELATIONS = ("nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem")
READY = "_SUCCESS"
MANIFEST = "manifest.json"
CACHE = "_tpch"  # tpchgen-cli output; `_` keeps it out of any landing scan


@dataclass(frozen=True)
class Batch:
    """One source's landing folder of one epoch and what it holds (row counts)."""

    epoch: int
    source: str
    folder: str  # relative to the stream's root
    inserts: dict[str, int] = field(default_factory=dict)
    deletes: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.inserts.values()) + sum(self.deletes.values())


@dataclass(frozen=True)
class Manifest:
    """What `generate` wrote: the arguments, the sources and every (epoch, source) batch."""

    root: Path
    scale: float
    epochs: int
    fraction: float
    seed: int
    sources: dict[str, int]  # name -> priority
    batches: list[Batch]

    def folder(self, source: str, epoch: int) -> Path:
        return self.root / source / f"epoch-{epoch}"

    def batch(self, source: str, epoch: int) -> Batch:
        for b in self.batches:
            if b.source == source and b.epoch == epoch:
                return b
        raise KeyError(f"no batch of source {source} in epoch {epoch}")

    def save(self) -> Path:
        data = asdict(self)
        data["root"] = "."
        path = self.root / MANIFEST
        path.write_text(json.dumps(data, indent=1) + "\n")
        return path

    @classmethod
    def load(cls, root: str | Path) -> Manifest:
        root = Path(root).resolve()
        data = json.loads((root / MANIFEST).read_text())
        data["root"] = root
        data["batches"] = [Batch(**b) for b in data["batches"]]
        return cls(**data)


def tpchgen(scale: float, out: Path) -> Path:
    """tpchgen-cli's eight tables (TBL text) in `out`, made once per scale factor."""
    stamp = out / "scale"
    if stamp.is_file() and stamp.read_text().strip() == repr(float(scale)):
        return out
    exe = Path(sys.executable).parent / "tpchgen-cli"
    if not exe.is_file():
        found = shutil.which("tpchgen-cli")
        if not found:
            raise ConfigError("tpchgen-cli not found next to Python or on PATH; run `make setup`")
        exe = Path(found)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # tpchgen-cli's own bar would fight the command's status line: its start and end are logged.
    cmd = [str(exe), "tbl", "-s", str(scale), "-o", str(out), "--no-progress", "-q"]
    log.info("tpchgen-cli: writing the TPC-H tables of scale factor %s to %s", scale, out)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    stamp.write_text(repr(float(scale)) + "\n")
    log.info("tpchgen-cli: scale factor %s written in %.0f s", scale, time.perf_counter() - started)
    return out


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link (the tables of SF 10 are 10 GB: no second copy), or a copy where the
    file system has none."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _fields(line: str) -> list[str]:
    line = line.rstrip("\n")
    return (line[:-1] if line.endswith("|") else line).split("|")


def _key(line: str) -> int:
    return int(line[: line.index("|")])


@dataclass
class _Plan:
    """The stream decided on keys alone; lines are fetched afterwards in one pass."""

    new_orders: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)  # epoch -> (key, template, cust)
    deleted: dict[int, list[int]] = field(default_factory=dict)  # epoch -> order keys
    new_customers: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # epoch -> (custkey, template)


def _plan(order_keys: list[int], cust_keys: list[int], lines_per_order: float, lineitems: int,
          epochs: int, fraction: float, customers_per_epoch: int, seed: int) -> _Plan:
    rng = random.Random(seed)
    per_side = max(1, round(fraction * lineitems / 2 / max(lines_per_order, 1.0)))
    alive = list(order_keys)  # order keys alive, in a stable order
    customers = list(cust_keys)
    next_order, next_cust = max(order_keys) + 1, max(cust_keys) + 1
    plan = _Plan()
    for epoch in range(2, epochs + 1):
        victims = rng.sample(alive, min(per_side, len(alive)))
        gone = set(victims)
        alive = [k for k in alive if k not in gone]
        plan.deleted[epoch] = victims
        news = []
        for _ in range(per_side):
            news.append((next_order, rng.choice(order_keys), rng.choice(customers)))
            next_order += 1
        plan.new_orders[epoch] = news
        alive.extend(k for k, _, _ in news)
        custs = []
        for _ in range(customers_per_epoch):
            custs.append((next_cust, rng.choice(cust_keys)))
            next_cust += 1
        plan.new_customers[epoch] = custs
        customers.extend(k for k, _ in custs)  # later epochs' orders may use them
    return plan


def _read_keys(path: Path) -> tuple[list[int], int]:
    keys, lines = [], 0
    with path.open() as fh:
        for line in fh:
            if line.strip():
                keys.append(_key(line))
                lines += 1
    return keys, lines


def _lines_by_key(path: Path, wanted: set[int]) -> dict[int, list[list[str]]]:
    found: dict[int, list[list[str]]] = {}
    with path.open() as fh:
        for line in fh:
            if line.strip() and _key(line) in wanted:
                found.setdefault(_key(line), []).append(_fields(line))
    return found


def _event(order: int, flag: int, fields: Iterable[str]) -> str:
    return f"{order}|{flag}|{'|'.join(fields)}\n"


def generate(
    scale: float,
    epochs: int,
    fraction: float,
    out_dir: str | Path,
    seed: int = 0,
    *,
    customers_per_epoch: int = 2,
) -> Manifest:
    """Write the stream (see the module doc) to `out_dir` and return its manifest.

    `fraction`: the share of lineitem rows changed per epoch after the first (0.001 is
    0.1 %), half inserted with new orders, half deleted with their orders; at least one
    order each way. Existing epoch folders in `out_dir` are replaced."""
    if epochs < 1:
        raise ConfigError(f"epochs must be at least 1, got {epochs}")
    if not 0 < fraction <= 0.5:
        raise ConfigError(f"fraction must be in (0, 0.5], got {fraction}")
    root = Path(out_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    tables = tpchgen(scale, root / CACHE)
    for source in SOURCES:
        if (root / source).exists():
            shutil.rmtree(root / source)

    log.info("stream: reading the keys of orders, customer and lineitem")
    order_keys, _ = _read_keys(tables / "orders.tbl")
    cust_keys, _ = _read_keys(tables / "customer.tbl")
    _, lineitems = _read_keys(tables / "lineitem.tbl")
    plan = _plan(order_keys, cust_keys, lineitems / max(len(order_keys), 1), lineitems,
                 epochs, fraction, customers_per_epoch, seed)

    # The lines the stream needs: templates of new orders, initial orders it deletes.
    templates = {t for news in plan.new_orders.values() for _, t, _ in news}
    initial = set(order_keys)
    victims = {k for ks in plan.deleted.values() for k in ks if k in initial}
    orders = _lines_by_key(tables / "orders.tbl", templates | victims)
    items = _lines_by_key(tables / "lineitem.tbl", templates | victims)
    customers = _lines_by_key(tables / "customer.tbl", {t for cs in plan.new_customers.values() for _, t in cs})

    made: dict[int, tuple[list[str], list[list[str]]]] = {}  # new order key -> (order, items)
    manifest = Manifest(root, float(scale), epochs, float(fraction), seed,
                        {name: prio for name, (prio, _) in SOURCES.items()}, [])

    # Epoch 1: the tables as they are (static rows).
    for source, (_, relations) in SOURCES.items():
        folder = manifest.folder(source, 1)
        folder.mkdir(parents=True)
        counts = {}
        for rel in relations:
            _link_or_copy(tables / f"{rel}.tbl", folder / f"{rel}.tbl")
            counts[rel] = _read_keys(tables / f"{rel}.tbl")[1]
        (folder / READY).write_text("")
        manifest.batches.append(Batch(1, source, f"{source}/epoch-1", inserts=counts))

    for epoch in range(2, epochs + 1):
        log.info("stream: writing epoch %d of %d", epoch, epochs)
        n = 0
        order_lines, item_lines = [], []
        ins = Counter()
        dels = Counter()
        for key, template, cust in plan.new_orders[epoch]:
            order = list(orders[template][0])
            order[0], order[1] = str(key), str(cust)
            lines = [[str(key), *item[1:]] for item in items[template]]
            made[key] = (order, lines)
            n += 1
            order_lines.append(_event(n, 1, order))
            item_lines.extend(_event(n, 1, item) for item in lines)
            ins["orders"] += 1
            ins["lineitem"] += len(lines)
        for key in plan.deleted[epoch]:
            order, lines = made[key] if key in made else (orders[key][0], items.get(key, []))
            n += 1
            order_lines.append(_event(n, 0, order))
            item_lines.extend(_event(n, 0, item) for item in lines)
            dels["orders"] += 1
            dels["lineitem"] += len(lines)
        folder = manifest.folder(SALES, epoch)
        folder.mkdir(parents=True)
        (folder / "orders.tbl").write_text("".join(order_lines))
        (folder / "lineitem.tbl").write_text("".join(item_lines))
        (folder / READY).write_text("")
        manifest.batches.append(Batch(epoch, SALES, f"{SALES}/epoch-{epoch}", dict(ins), dict(dels)))

        folder = manifest.folder(CATALOG, epoch)
        folder.mkdir(parents=True)
        cust_lines = []
        for i, (key, template) in enumerate(plan.new_customers[epoch], 1):
            row = list(customers[template][0])
            row[0], row[1] = str(key), f"Customer#{key:09d}"
            cust_lines.append(_event(i, 1, row))
        if cust_lines:
            (folder / "customer.tbl").write_text("".join(cust_lines))
        (folder / READY).write_text("")
        inserted = {"customer": len(cust_lines)} if cust_lines else {}
        manifest.batches.append(Batch(epoch, CATALOG, f"{CATALOG}/epoch-{epoch}", inserted, {}))
    manifest.save()
    return manifest


def read_events(folder: Path, relation: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    """(+1 | -1, fields as text) of one relation's file in a landing folder: static rows
    are inserts. A reader of our own files only, independent of the ingest code."""
    path = folder / f"{relation}.tbl"
    if not path.is_file():
        return
    with path.open() as fh:
        for line in fh:
            if not line.strip():
                continue
            fields = _fields(line)
            if line.rstrip("\n").endswith("|"):
                yield 1, tuple(fields)
            else:
                yield (1 if fields[1] == "1" else -1), tuple(fields[2:])


def alive(manifest: Manifest, through_epoch: int | Mapping[str, int]) -> dict[str, list[tuple[str, ...]]]:
    """Every relation's live tuples (text fields) once the batches up to `through_epoch`
    are in (an epoch, or one per source: {"sales": 3, "catalog": 2} when a source is
    behind): the replay of the stream's files, for oracles (DuckDB over the live rows)."""
    live: dict[str, Counter] = {rel: Counter() for rel in RELATIONS}
    for batch in sorted(manifest.batches, key=lambda b: (b.epoch, manifest.sources[b.source])):
        last = through_epoch if isinstance(through_epoch, int) else through_epoch.get(batch.source, 0)
        if batch.epoch > last:
            continue
        for rel in SOURCES[batch.source][1]:
            for sign, row in read_events(manifest.root / batch.folder, rel):
                live[rel][row] += sign
    out = {}
    for rel, counts in live.items():
        if any(c < 0 for c in counts.values()):
            raise ValueError(f"{rel}: a delete of a tuple that is not alive in the stream")
        out[rel] = [row for row, c in counts.items() for _ in range(c)]
    return out
