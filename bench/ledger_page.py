"""The Airflow plugin's ledger page (/cumulus/): how long it takes to answer for a home with
many epochs and views.

Builds a home (TPC-H schema, `--views` views: the TPC-H view corpus and the demo views,
then copies of corpus views under other names, which share their maps) and closes
`--epochs` epochs: the first `--event-epochs` with a generated TPC-H stream's events, the
rest empty (the page reads the ledger and the views' stable snapshots: what an epoch
held does not matter to it). Then a separate process serves the plugin's FastAPI app
(what Airflow's API server mounts) and times GET /cumulus/:

- cold: the first request of a new process (imports done, nothing cached);
- again: the same ledger snapshot, asked again;
- new epoch: after one more epoch closed (the ledger and the maps moved on);
- expired: what the page keeps dropped (what a page costs when it must read everything:
  before it kept anything per table version, every page cost this).

    .venv/bin/python bench/ledger_page.py --epochs 100 --views 30

writes bench/results/ledger_page.{md,json}. `--reuse` keeps a home built before.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cumulus.store.tables import Home

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SCHEMA = REPO / "demo" / "tpch_schema.sql"
CORPUS = REPO / "tests" / "fixtures" / "views" / "tpch"
DEMO = REPO / "demo" / "views"
log = logging.getLogger("bench.ledger_page")

# The plugin's app in its own process; one line per request asked on stdin.
SERVE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import cumulus_plugin
from fastapi.testclient import TestClient

t = time.perf_counter()
client = TestClient(cumulus_plugin.create_app())
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    what = line.strip()
    if what == "after warm-up":
        cumulus_plugin.WARMED.wait()
        print(json.dumps({"warm_up_s": round(time.perf_counter() - t, 3)}), flush=True)
        continue
    if what == "expire":
        from cumulus.pipeline import status
        status._MEMO.clear()
    t = time.perf_counter()
    page = client.get("/")
    s = time.perf_counter() - t
    print(json.dumps({"what": what, "status": page.status_code, "seconds": round(s, 4), "bytes": len(page.text),
                      "epochs": page.text.count("<tr class="), "views": page.text.count("<tr><td>")}),
          flush=True)
"""


def view_set(count: int) -> dict[str, str]:
    views = {p.stem: p.read_text() for p in sorted(CORPUS.glob("*.sql"))}
    views |= {p.stem: p.read_text() for p in sorted(DEMO.glob("*.sql")) if p.stem not in views}
    corpus = sorted(CORPUS.glob("*.sql"))
    copy = 2
    while len(views) < count:
        for p in corpus:
            if len(views) >= count:
                break
            views[f"{p.stem}_{copy}"] = p.read_text()
        copy += 1
    return dict(list(views.items())[:count])


def build(home: Path, epochs: int, event_epochs: int, views: int, work: Path) -> None:
    from cumulus.app import Engine
    from cumulus.config import load_settings
    from cumulus.ingest.sources import add_source
    from cumulus.ingest.tpch_stream import generate
    from cumulus.store.home import init_home

    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(work / "stream", ignore_errors=True)
    home.mkdir(parents=True)
    (home / "cumulus.toml").write_text('catalog = "bench"\nspark_master = "local[2]"\n')
    stream = generate(0.001, max(event_epochs, 1), 0.01, work / "stream", 7)
    settings = load_settings(home)
    engine = Engine(settings, app_name="bench ledger page").keep_warm()
    init_home(Home(engine.spark, settings), SCHEMA)
    for name, priority in stream.sources.items():
        add_source(settings, name, priority)
    t = time.perf_counter()
    for name, sql in view_set(views).items():
        engine.add_view(name, sql, "sql")
    log.info("%d views registered in %.0f s", views, time.perf_counter() - t)
    for epoch in range(1, epochs + 1):
        t = time.perf_counter()
        if epoch <= event_epochs:
            for source in stream.sources:
                engine.ingest(source, [str(stream.folder(source, epoch))], "dbtoaster")
        engine.close(epoch)
        log.info("epoch %d closed in %.1f s", epoch, time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--views", type=int, default=30)
    parser.add_argument("--event-epochs", type=int, default=3, help="epochs with events (the rest are empty)")
    parser.add_argument("--repeat", type=int, default=5, help="requests per measurement")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cumulus-bench-ledger"))
    parser.add_argument("--reuse", action="store_true", help="keep the home built before")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    home = args.work / "home"
    if not (args.reuse and (home / "schema.sql").exists()):
        build(home, args.epochs, args.event_epochs, args.views, args.work)

    from cumulus.app import Engine

    engine = Engine.open(home, app_name="bench ledger page")
    env = {**os.environ, "CUMULUS_HOME": str(home), "AIRFLOW_HOME": tempfile.mkdtemp(prefix="bench-airflow-"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "CUMULUS_PLUGIN_WARM_UP": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(REPO / "plugins")], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def answer() -> dict:
        while True:  # the app's process may print its own lines too
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the plugin's process ended")
            if line.startswith('{"'):
                return json.loads(line)

    def ask(what: str) -> dict:
        proc.stdin.write(what + "\n")
        proc.stdin.flush()
        return answer()

    try:
        assert answer()["ready"]
        cold = ask("cold")
        again = [ask("again") for _ in range(args.repeat)]
        proc.stdin.close()
        proc.wait(timeout=60)
        # A second process: the page asked for only once the app's start-up reading is done.
        proc = subprocess.Popen([sys.executable, "-c", SERVE, str(REPO / "plugins")], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert answer()["ready"]
        warm_up = ask("after warm-up")
        warmed = ask("first after warm-up")
        expired = [ask("expire") for _ in range(args.repeat)]
        new = []
        for _ in range(args.repeat):
            engine.close()  # one more epoch (empty): the ledger and the maps move on
            new.append(ask("new epoch"))
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    rows = {"cold": [cold], "again": again, "first after warm-up": [warmed], "new epoch": new, "expired": expired}
    closed = new[-1]["epochs"]
    result = {"epochs": closed, "views": cold["views"], "warm_up_s": warm_up["warm_up_s"], "requests": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ledger_page.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# The ledger page (/cumulus/)",
        "",
        f"`bench/ledger_page.py --epochs {args.epochs} --views {args.views}`: the plugin's FastAPI app in its own "
        f"process, GET /cumulus/ on a home with {closed} epochs in the ledger and {cold['views']} views (seconds; "
        f"median and max of {args.repeat} requests).",
        "",
        "- cold: the first request of a new process, sent as soon as the app is made (it waits for the",
        "  app's start-up reading of the status, then finds it);",
        f"- first after warm-up: a second process's first request, sent once that reading was done "
        f"({warm_up['warm_up_s']:.1f} s after the app was made): what a user meets after the API server started;",
        "- again: the same ledger asked again; new epoch: after one more epoch closed; expired: everything the",
        "  page keeps dropped but the data files read (the views compiled again, the ledger and maps re-read).",
        "",
        "| request | median s | max s | page bytes |",
        "|:--|---:|---:|---:|",
    ]
    for what, rs in rows.items():
        secs = [r["seconds"] for r in rs]
        lines.append(f"| {what} | {statistics.median(secs):.3f} | {max(secs):.3f} | {rs[-1]['bytes']:,} |")
    report = "\n".join(lines) + "\n"
    (args.out / "ledger_page.md").write_text(report)
    print(report)
    return 0 if all(r["status"] == 200 for rs in rows.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
