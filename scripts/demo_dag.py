"""The demo's DAG runs (scripts/demo.sh, steps 4 and 5), each with a progress bar:
`airflow dags test cumulus_epoch` for epochs 1..N, then `airflow dags test cumulus_dbt`,
all in one Python process (scripts/airflow_runs.py: Airflow imported and its execution
API started once, while the warm engine starts, instead of about 16 s per run).

Each run's whole output goes to LOGS/<dag>[-<epoch>].log; its bar counts the run's tasks
(or, in a task that runs dbt, dbt's nodes: its "N of M" lines), with the task at work and
the seconds so far. An epoch's views are printed at its tag epoch-N (PyIceberg, no JVM)
as soon as its `close` task ends, while validation goes on; after its run, the ledger
and the validation report (`cumulus epoch status`, `cumulus quality report`).

    .venv/bin/python scripts/demo_dag.py --logs DIR --start ISO --epochs N --tasks N \\
        --views NAME... [--clock T0] [--wait FILE...]

--wait: files that must exist before the first run (Airflow's database set up, the warm
engine's state file); --abort-if: files that end the wait at once (a setup that failed,
an engine that exited). Exit status 0 when every run ends in success, else 1 (the failed
run's log on stderr); the Airflow process is stopped either way. Not on a terminal (CI, a pipe) a bar is drawn once, at its run's
end; the views and skipped steps print as they happen either way.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The lines of `airflow dags test` (Airflow 3's [DAG TEST] log) and of dbt that move the bar.
TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+) map_index=(-?\d+)")
TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+) map_index=(-?\d+)")
SKIPPED = re.compile(r"(epoch \d+ source [^:]+: [a-z]+: skipped \([^)]*\))")
RUN_END = re.compile(r"DagRun Finished: .*state=([a-z_]+)")
DBT_NODE_DONE = re.compile(r"\b(\d+) of (\d+) (OK|PASS|WARN|ERROR|FAIL|SKIP)\b")
RUNNER = Path(__file__).resolve().parent / "airflow_runs.py"
RUNNER_EXIT = re.compile(r"^\[airflow_runs\] exit (\d+)$")  # its line after each command
WAIT_S = 300  # for the --wait files, at most


def task_name(task_id: str, map_index: str) -> str:
    return task_id if map_index == "-1" else f"{task_id}[{map_index}]"


@dataclass
class RunState:
    """What the log has said so far: tasks done, the task at work, dbt's nodes, the end."""

    tasks_done: int = 0
    current: str = "starting Airflow"
    dbt_done: int = 0
    dbt_total: int = 0
    outcome: str | None = None

    def feed(self, line: str) -> tuple[str, str] | None:
        """Take one log line; returns ("task-end", name) when a task ended, ("note", text)
        for a line worth printing, else None."""
        if m := TASK_START.search(line):
            self.current = task_name(*m.groups())
        elif m := TASK_END.search(line):
            self.tasks_done += 1
            name = task_name(*m.groups())
            self.current = f"{name} done"
            return "task-end", name
        elif m := DBT_NODE_DONE.search(line):
            self.dbt_done, self.dbt_total = int(m.group(1)), int(m.group(2))
            self.current = f"dbt: {self.dbt_done} of {self.dbt_total} nodes"
        elif m := SKIPPED.search(line):
            return "note", m.group(1)
        elif m := RUN_END.search(line):
            self.outcome = m.group(1)
        return None

    def progress(self, tasks: int | None) -> tuple[int, int | None]:
        """(completed, total) for the bar: dbt's nodes once dbt runs, else the tasks."""
        if self.dbt_total:
            return self.dbt_done, self.dbt_total
        return self.tasks_done, tasks


def show_views(console, epoch: int, names: list[str], clock: float | None = None, max_rows: int = 10) -> None:
    """The views at tag epoch-N, each as a table of its first rows (as `cumulus read NAME
    --epoch N` prints them); `clock`: the demo's start (time.time()), to say when."""
    from cumulus.config import load_settings
    from cumulus.output import render
    from cumulus.read import Reader

    reader = Reader(load_settings())
    at = reader.stable(epoch)
    if clock is not None:
        console.print(f"   [bold][{time.time() - clock:3.0f}s] epoch {epoch} is closed: its views at tag epoch-{epoch}[/]")
    for name in names:
        started = time.monotonic()
        rows = reader.read_view(name, at)
        table = render(reader.view_columns(name), rows[:max_rows], "table").splitlines()[:-1]
        more = f", the first {max_rows} shown" if len(rows) > max_rows else ""
        console.print(f"\n   view {name} at tag epoch-{epoch} ({len(rows)} rows{more}; read in "
                      f"{time.monotonic() - started:.1f} s, as `cumulus read {name} --epoch {epoch}`):",
                      highlight=False)
        for line in table:
            console.print(f"     {line}", highlight=False, markup=False)


@dataclass(frozen=True)
class Run:
    """One DAG run of the demo: its `airflow` arguments, its log's name, the tasks it has
    (mapped ones counted each; None: unknown) and its epoch (None: the dbt run)."""

    title: str
    command: str
    log: str
    tasks: int | None = None
    epoch: int | None = None


def demo_runs(start: str, epochs: int, tasks: int) -> list[Run]:
    """cumulus_epoch for epochs 1..N (a manual run at the end of the epoch's interval, the
    epoch given as the DAG's param), then cumulus_dbt at the last one."""
    def date(n: int) -> str:
        return (dt.datetime.fromisoformat(start) + dt.timedelta(days=n)).isoformat()

    runs = []
    for n in range(1, epochs + 1):
        command = f"dags test cumulus_epoch {date(n)} --conf {shlex.quote(json.dumps({'epoch': n}))}"
        runs.append(Run(f"4/6 Epoch {n}: airflow {command}", command, f"cumulus_epoch-{n}.log", tasks, n))
    command = f"dags test cumulus_dbt {date(epochs)}"
    runs.append(Run(f"5/6 dbt on the published snapshot: airflow {command}", command, "cumulus_dbt.log"))
    return runs


def follow(run: Run, lines: Iterator[str], log: Path, console, views: list[str], clock: float | None) -> str | None:
    """Read one run's output from the runner (up to its exit line) into `log`, drawing its
    bar; returns the run's outcome (None: no end in its output)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    state, shown = RunState(), False
    columns = (SpinnerColumn(), TextColumn("   {task.description:<32}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out, Progress(*columns, console=console, transient=False) as bar:
        row = bar.add_task(state.current, total=run.tasks)
        for line in lines:
            if RUNNER_EXIT.match(line.strip()):
                break
            out.write(line)
            event = state.feed(line)
            if event and event[0] == "note":
                bar.console.print(f"   {event[1]}")
            completed, total = state.progress(run.tasks)
            bar.update(row, description=state.current[:32], completed=completed, total=total)
            if event == ("task-end", "close") and run.epoch is not None and views and not shown:
                shown = True
                out.flush()
                show_views(bar.console, run.epoch, views, clock)
        bar.update(row, description=f"run {state.outcome or 'ended'}")
    if state.outcome == "success" and run.epoch is not None and views and not shown:
        show_views(console, run.epoch, views, clock)  # the close was skipped (a rerun): as the tag holds them
    return state.outcome


def report_epoch(console, epoch: int) -> None:
    """The ledger, then the epoch's validation report (its Data Docs page last), as the CLI prints them."""
    def cumulus(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cumulus.cli", *args], capture_output=True, text=True)

    def indented(text: str) -> None:
        for line in text.splitlines():
            console.print(f"   {line}", markup=False, highlight=False)

    console.print()
    indented(cumulus("epoch", "status").stdout)
    console.print()
    report = cumulus("quality", "report", "--epoch", str(epoch))
    indented(report.stdout if report.returncode == 0 else f"validation: not reported ({report.stderr.strip()})")


def wait_for(paths: list[Path], abort_if: list[Path], timeout: float = WAIT_S) -> str | None:
    """None once every one of `paths` exists; else why not: one of `abort_if` appeared, or
    `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    for path in paths:
        while not path.exists():
            if stop := next((a for a in abort_if if a.exists()), None):
                return f"{stop.name} appeared before {path}"
            if time.monotonic() > deadline:
                return f"{path} did not appear within {timeout:.0f} s"
            time.sleep(0.2)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=Path, required=True, help="the folder of the runs' logs")
    parser.add_argument("--start", required=True, help="the first epoch's start (ISO date and time)")
    parser.add_argument("--epochs", type=int, required=True, help="how many epochs to run")
    parser.add_argument("--tasks", type=int, required=True, help="cumulus_epoch's tasks (mapped ones counted each)")
    parser.add_argument("--views", nargs="+", default=[], metavar="NAME", help="views to print at each close")
    parser.add_argument("--clock", type=float, help="the demo's start (seconds since 1970), to say when")
    parser.add_argument("--wait", type=Path, action="append", default=[], help="a file to wait for before the runs")
    parser.add_argument("--abort-if", type=Path, action="append", default=[], help="a file that ends the wait")
    args = parser.parse_args(argv)

    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)  # long lines stay whole in a log
    runner = subprocess.Popen([sys.executable, str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = iter(runner.stdout)
    done = False
    try:
        if (why := wait_for(args.wait, args.abort_if)) is not None:
            print(f"   demo_dag: not started: {why}", file=sys.stderr)
            return 1
        runs = demo_runs(args.start, args.epochs, args.tasks)
        runner.stdin.write(runs[0].command + "\n")
        runner.stdin.flush()
        for i, run in enumerate(runs):
            if i and runs[i - 1].epoch is not None:  # while this run starts
                report_epoch(console, runs[i - 1].epoch)
            elapsed = f"[{time.time() - args.clock:3.0f}s] " if args.clock else ""
            console.print(f"\n[bold]== {elapsed}{run.title}[/]", markup=True, highlight=False)
            outcome = follow(run, lines, args.logs / run.log, console, args.views, args.clock)
            if outcome != "success":
                print(f"   the run did not succeed ({outcome or 'no end in its log'}); its log: {args.logs / run.log}",
                      file=sys.stderr)
                return 1
            if i + 1 < len(runs):
                runner.stdin.write(runs[i + 1].command + "\n")
                runner.stdin.flush()
        console.print(f"   dbt: success: staging and marts rebuilt at the last epoch (log: {args.logs / runs[-1].log})")
        done = True
        return 0
    finally:
        if done:  # idle: it ends at the end of its input
            runner.stdin.close()
            runner.wait()
        else:  # perhaps in a run, its output unread: stopped
            runner.kill()
            runner.wait()


if __name__ == "__main__":
    sys.exit(main())
