"""`airflow` commands in one Python process, read one per line from stdin: Airflow is
imported, its CLI built and its in-process execution API (the one `airflow dags test`
runs its tasks through) started once, while the caller gets ready, instead of once per
command (about 16 s each on 2 cores: 9 s of imports and DAG parsing, 7 s of API).

    printf '%s\\n' "dags test cumulus_epoch 2024-01-02 --conf {\\"epoch\\": 1}" | python scripts/airflow_runs.py

Each line is one command's arguments (shell words, as after `airflow`); its output goes
to stdout and stderr as the command prints it, then a line `[airflow_runs] exit N` (N:
its exit status, 0-255 as a process's) on each stream, or once when they are one file,
always at the start of a line. "[airflow_runs] ready" (stdout) says the warm-up is done.
It stops at end of input. The commands share the process: a command with `--output`
sends the console's log records to stderr from then on, as the `airflow` CLI does for it. The demo (scripts/demo_dag.py) and the Airflow tests
(tests/airflow/airflowkit.py) run their commands through it."""

from __future__ import annotations

import os
import shlex
import sys
import time
import traceback

MARK = "[airflow_runs]"


def warm_up():
    """The CLI's parser, with the in-process execution API built ahead of the first task."""
    from airflow.cli import cli_parser
    from airflow.configuration import write_default_airflow_configuration_if_needed
    from airflow.sdk.execution_time import task_runner  # noqa: F401 - what runs each task
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

    write_default_airflow_configuration_if_needed()  # as `airflow` does before a command
    parser = cli_parser.get_parser()
    try:  # built, started and through a first request here (cached), not at the first task
        InProcessTestSupervisor._api_client().get("health")  # (the client `dags test` uses)
    except Exception as exc:  # only time is lost: the first task builds it
        print(f"{MARK} the execution API was not started ahead: {exc}", file=sys.stderr, flush=True)
    return parser


def run(parser, line: str) -> int:
    """One command, as `airflow <line>` runs it; its exit status."""
    from airflow.cli.utils import redirect_stdout_log_handlers_to_stderr

    try:
        args = parser.parse_args(shlex.split(line))
        if hasattr(args, "output"):  # as `airflow` does: logs off the structured output
            redirect_stdout_log_handlers_to_stderr()
        args.func(args)
    except SystemExit as stop:  # argparse, and `dags test` when its run fails
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr, flush=True)
            return 1
        return (stop.code or 0) & 0xFF  # as a process's exit status
    except Exception:  # the command's own error, as the CLI would end with it
        traceback.print_exc()
        return 1
    return 0


def main() -> int:
    started = time.monotonic()
    parser = warm_up()
    print(f"{MARK} ready ({time.monotonic() - started:.1f} s)", flush=True)
    status = 0
    merged = os.path.sameopenfile(sys.stdout.fileno(), sys.stderr.fileno())  # one marker, not two
    for line in sys.stdin:
        if line.strip():
            status = run(parser, line)
            for stream in (sys.stdout,) if merged else (sys.stderr, sys.stdout):
                print(f"\n{MARK} exit {status}", file=stream, flush=True)  # a line of its own
    return status


if __name__ == "__main__":
    sys.exit(main())
