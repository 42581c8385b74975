"""One DAG run of the demo, with a progress bar: runs `airflow dags test ...` (the command
after `--`), keeps its whole output in a log file and draws a rich progress bar of the
run's tasks (or, in a task that runs dbt, of dbt's nodes: its "N of M" lines), with the
task at work and the seconds so far. With --views, the views are printed at their tag
epoch-N (PyIceberg, no JVM) as soon as the `close` task ends, while validation goes on.

    .venv/bin/python scripts/demo_dag.py --log FILE [--tasks N] [--views EPOCH NAME ...] [--clock T0] \\
        -- airflow dags test cumulus_epoch DATE --conf '{"epoch": N}'

Exit status 0 when the run ends in success, else 1 (the log's path on stderr). Not on a
terminal (CI, a pipe) the bar is drawn once, at the end; the views and skipped steps
print as they happen either way.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The lines of `airflow dags test` (Airflow 3's [DAG TEST] log) and of dbt that move the bar.
TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+) map_index=(-?\d+)")
TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+) map_index=(-?\d+)")
SKIPPED = re.compile(r"(epoch \d+ source [^:]+: [a-z]+: skipped \([^)]*\))")
RUN_END = re.compile(r"DagRun Finished: .*state=([a-z_]+)")
DBT_NODE_DONE = re.compile(r"\b(\d+) of (\d+) (OK|PASS|WARN|ERROR|FAIL|SKIP)\b")


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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("demo_dag: give the command after --", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="where the run's whole output goes")
    parser.add_argument("--tasks", type=int, help="how many tasks the run has (mapped ones counted each)")
    parser.add_argument("--views", nargs="+", metavar="EPOCH NAME",
                        help="print these views at tag epoch-EPOCH when the close task ends")
    parser.add_argument("--clock", type=float, help="the demo's start (seconds since 1970), to say when")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    epoch, views = (int(args.views[0]), args.views[1:]) if args.views else (None, [])

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(highlight=False)
    state, shown = RunState(), False
    columns = (SpinnerColumn(), TextColumn("   {task.description:<32}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("w") as log, Progress(*columns, console=console, transient=False) as bar:
        row = bar.add_task(state.current, total=args.tasks)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL)
        for line in proc.stdout:
            log.write(line)
            event = state.feed(line)
            if event and event[0] == "note":
                bar.console.print(f"   {event[1]}")
            completed, total = state.progress(args.tasks)
            bar.update(row, description=state.current[:32], completed=completed, total=total)
            if event == ("task-end", "close") and views and not shown:
                shown = True
                log.flush()
                show_views(bar.console, epoch, views, args.clock)
        proc.wait()
        bar.update(row, description=f"run {state.outcome or 'ended'}")
    if state.outcome != "success":
        print(f"   the run did not succeed ({state.outcome or 'no end in its log'}); its log: {args.log}",
              file=sys.stderr)
        return 1
    if views and not shown:  # the close was skipped (a rerun): the views as the tag holds them
        show_views(console, epoch, views, args.clock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
