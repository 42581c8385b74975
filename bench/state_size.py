"""How big the maps of each view grow with the data (issue 42): for every view of the
TPC-H view corpus (tests/fixtures/views/tpch), the TPC-H queries as written
(tests/fixtures/views/tpch_queries) and the construct views over TPC-H
(tests/fixtures/views/constructs), each compiled alone, the reference interpreter loads
`tpchgen-cli`'s tables at two scale factors (dimensions first, lineitem last) and every
map's entries are counted.

Per view: its maps, its entries, entries per base row at the larger scale, and the
growth exponent log(E2 / E1) / log(B2 / B1) between the scales (1.0: linear in the base
rows; 2.0: quadratic). The largest map is named with its share. Targets (issue 42):
exponent <= 1.15 and at most 5 entries per base row.

    .venv/bin/python bench/state_size.py --scales 0.001 0.004

writes bench/results/state_size.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VIEWS = REPO / "tests" / "fixtures" / "views"
SCHEMA = REPO / "tests" / "fixtures" / "schemas" / "tpch.sql"
KINDS = ("tpch", "tpch_queries", "constructs")
# Dimensions first: a fact's trigger then probes the dimensions it joins by key.
LOAD_ORDER = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
TARGET_EXPONENT, TARGET_PER_ROW = 1.15, 5.0


def base_events(scale: float, cache: Path) -> list:
    """Every tuple of tpchgen-cli's tables at `scale` as an insert, in LOAD_ORDER."""
    from cumulus.ingest.tpch_stream import tpchgen
    from cumulus.m3.interpreter import Event
    from cumulus.schema import load_schema, parse_value

    schema = load_schema(SCHEMA)
    folder = tpchgen(scale, cache / f"sf{scale}")
    events = []
    for name in LOAD_ORDER:
        rel = schema.relation(name)
        for line in (folder / f"{name}.tbl").read_text().splitlines():
            fields = line.rstrip("|").split("|")
            events.append(Event("+", name, tuple(parse_value(f, c.type) for f, c in zip(fields, rel.columns, strict=True))))
    return events


def measure(name: str, sql: str, events: list) -> dict:
    """The view's maps after loading `events`: entries per map."""
    from cumulus.m3.interpreter import Interpreter
    from cumulus.schema import load_schema
    from cumulus.sql.views import compile_views

    compiled = compile_views(load_schema(SCHEMA), [(name, sql)])
    started = time.perf_counter()
    interp = Interpreter(compiled.checked).run(events)
    entries = {m: len(interp.state[m].entries) for m in compiled.maps}
    return {"maps": len(compiled.maps), "entries": entries, "seconds": round(time.perf_counter() - started, 2),
            "keys": {m: list(compiled.checked.maps[m].key_names) for m in compiled.maps}}


def views(kinds: tuple[str, ...]) -> list[tuple[str, str]]:
    from cumulus.errors import CumulusError
    from cumulus.schema import load_schema
    from cumulus.sql.views import compile_views

    schema = load_schema(SCHEMA)
    out = []
    for kind in kinds:
        for path in sorted((VIEWS / kind).glob("*.sql")):
            try:
                compile_views(schema, [(path.stem, path.read_text())])
            except CumulusError:
                continue  # refused: no state
            out.append((f"{kind}/{path.stem}", path.read_text()))
    return out


def report(rows: list[dict], scales: list[float], rows_at: dict[float, int]) -> str:
    small, large = scales
    lines = [
        "# State size per view (bench/state_size.py)",
        "",
        f"Each view compiled alone; the reference interpreter loads tpchgen-cli's tables at SF {small} "
        f"({rows_at[small]:,} base rows) and SF {large} ({rows_at[large]:,}), dimensions first; every map's "
        "entries counted. Exponent: log(E2/E1) / log(B2/B1), 1.0 = linear. Targets (issue 42): exponent <= "
        f"{TARGET_EXPONENT}, at most {TARGET_PER_ROW:g} entries per base row.",
        "",
        f"| view | maps | entries at SF {large} | per base row | exponent | largest map (its share) | meets |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for r in sorted(rows, key=lambda r: -r["per_row"]):
        ok = r["exponent"] <= TARGET_EXPONENT and r["per_row"] <= TARGET_PER_ROW
        lines.append(f"| {r['view']} | {r['maps']} | {r['entries']:,} | {r['per_row']:.2f} | {r['exponent']:.2f} | "
                     f"`{r['largest']}` ({r['largest_share']:.0%}) | {'yes' if ok else '**no**'} |")
    met = sum(r["exponent"] <= TARGET_EXPONENT and r["per_row"] <= TARGET_PER_ROW for r in rows)
    worst_exp = max(rows, key=lambda r: r["exponent"])
    worst_row = max(rows, key=lambda r: r["per_row"])
    lines += ["", f"{met} of {len(rows)} views meet both targets. Largest exponent: {worst_exp['view']} "
              f"({worst_exp['exponent']:.2f}); most entries per base row: {worst_row['view']} "
              f"({worst_row['per_row']:.2f}).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", type=float, nargs=2, default=[0.001, 0.004])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS))
    parser.add_argument("--cache", type=Path, default=REPO / ".cache" / "tpch")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "state_size")
    args = parser.parse_args(argv)
    scales = sorted(args.scales)
    loads = {s: base_events(s, args.cache) for s in scales}
    rows_at = {s: len(e) for s, e in loads.items()}
    rows = []
    for name, sql in views(tuple(args.kinds)):
        got = {s: measure(name, sql, loads[s]) for s in scales}
        e1, e2 = (sum(got[s]["entries"].values()) for s in scales)
        exponent = math.log(max(e2, 1) / max(e1, 1)) / math.log(rows_at[scales[1]] / rows_at[scales[0]])
        largest = max(got[scales[1]]["entries"].items(), key=lambda kv: kv[1])
        keys = got[scales[1]]["keys"][largest[0]]
        row = {"view": name, "maps": got[scales[1]]["maps"], "entries": e2, "entries_small": e1,
               "per_row": e2 / rows_at[scales[1]], "exponent": exponent,
               "largest": f"{largest[0]}[{', '.join(keys)}]", "largest_share": largest[1] / max(e2, 1),
               "seconds": got[scales[1]]["seconds"]}
        rows.append(row)
        print(f"{name}: {row['maps']} maps, {e2:,} entries ({row['per_row']:.2f} per base row), "
              f"exponent {exponent:.2f}, {row['seconds']} s", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"scales": scales, "base_rows": rows_at, "views": rows},
                                                        indent=1) + "\n")
    args.out.with_suffix(".md").write_text(report(rows, scales, rows_at))
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
