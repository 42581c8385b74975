"""`airflow` commands in one Python process, read one per line from stdin: Airflow is
imported, its CLI built and its in-process execution API (the one `airflow dags test`
runs its tasks through) started once, while the caller gets ready, instead of once per
command (about 16 s each on 2 cores: 9 s of imports and DAG parsing, 7 s of API).

    printf '%s\\n' "dags test cumulus_epoch 2024-01-02 --conf {\\"epoch\\": 1}" | python scripts/airflow_runs.py

Each line is one command's arguments (shell words, as after `airflow`); its output goes
to stdout as the command prints it, then a line `[airflow_runs] exit N` (N: its exit
status). "[airflow_runs] ready" says the warm-up is done. It stops at end of input."""

from __future__ import annotations

import shlex
import sys
import time

MARK = "[airflow_runs]"


def warm_up():
    """The CLI's parser, with the in-process execution API built ahead of the first task."""
    from airflow.cli import cli_parser
    from airflow.configuration import write_default_airflow_configuration_if_needed
    from airflow.sdk.execution_time import task_runner  # noqa: F401 - what runs each task
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

    write_default_airflow_configuration_if_needed()  # as `airflow` does before a command
    parser = cli_parser.get_parser()
    # Built, started and through its first request here (cached), not at the first task.
    InProcessTestSupervisor._api_client().get("health")
    return parser


def run(parser, line: str) -> int:
    """One command, as `airflow <line>` runs it; its exit status."""
    try:
        args = parser.parse_args(shlex.split(line))
        args.func(args)
    except SystemExit as stop:  # argparse, and `dags test` when its run fails
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr, flush=True)
            return 1
        return stop.code or 0
    except Exception as exc:  # the command's own error, as the CLI would end with it
        print(f"airflow {line}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


def main() -> int:
    started = time.monotonic()
    parser = warm_up()
    print(f"{MARK} ready ({time.monotonic() - started:.1f} s)", flush=True)
    status = 0
    for line in sys.stdin:
        if line.strip():
            status = run(parser, line)
            print(f"{MARK} exit {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
