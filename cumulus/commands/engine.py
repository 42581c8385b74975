"""`cumulus engine serve|status|stop`: the home's warm engine (cumulus/pipeline/server.py).

    cumulus --home H engine serve [--cadence S] [--port P]   run it (in the foreground)
        [--host 0.0.0.0 --url http://NAME:P]                 (in a container: docker-compose.yml)
    cumulus --home H engine status [--format F]               is it up, what is it doing
    cumulus --home H engine stop                              finish the current step, exit
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

from cumulus.config import settings_from_args
from cumulus.errors import EngineError, EngineUnavailable
from cumulus.output import FORMATS, render
from cumulus.pipeline.client import engine_state, find_engine
from cumulus.pipeline.server import EngineServer


def cmd_serve(args: argparse.Namespace) -> int:
    from cumulus.store.home import load_home_schema

    settings = settings_from_args(args)
    load_home_schema(settings)  # refuses a folder that is not an initialized home
    state = engine_state(settings)  # on this host: its pid alive; from another host: it answers
    if state is not None and (state.get("host") == socket.gethostname() or find_engine(settings) is not None):
        raise EngineError(f"a warm engine already serves {settings.home}: pid {state['pid']} at {state['url']}")
    server = EngineServer(settings, cadence=args.cadence, port=args.port, host=args.host, url=args.url)
    print(f"cumulus engine: starting for {settings.home} on {server.url} (Ctrl-C or `cumulus engine stop` to stop)",
          file=sys.stderr, flush=True)
    server.serve()
    return 0


def _running(args: argparse.Namespace):
    """(settings, a client of the home's engine); EngineUnavailable when none runs."""
    settings = settings_from_args(args)
    client = find_engine(settings)
    if client is None:
        raise EngineUnavailable(f"no warm engine runs for {settings.home} (start one: cumulus engine serve)")
    return settings, client


def cmd_status(args: argparse.Namespace) -> int:
    status = _running(args)[1].status()
    if args.format == "json":  # the engine's own status document, whole
        print(json.dumps(status, indent=1))
        return 0
    current = status["current"]
    rows = [
        ("url", status["url"]), ("pid", status["pid"]), ("started_at", status["started_at"]),
        ("spark_ui", status["spark_ui"]), ("landing_cadence_s", status["cadence_s"]),
        ("queued_steps", status["queued"]),
        ("current_step", f"{current['job']} {' '.join(current['args'])}" if current else "idle"),
    ]
    rows += [(f"step {s['id']}", f"{s['job']} {s['state']} exit={s['exit']} {s['seconds'] or ''}s ({s['origin']})")
             for s in status["steps"][-10:]]
    sys.stdout.write(render(["field", "value"], rows, args.format))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    settings, client = _running(args)
    client.stop()
    deadline = time.monotonic() + args.wait
    while engine_state(settings) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    gone = engine_state(settings) is None
    print("cumulus engine: stopped" if gone else f"cumulus engine: still finishing its step after {args.wait:.0f} s",
          file=sys.stderr)
    return 0 if gone else 1


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "engine", help="the home's warm engine: one long-lived Spark process that runs every step",
        description="The warm engine keeps one Spark session for the home, runs the pipeline's steps handed "
        "to it (Airflow's tasks do when it is up) and ingests and applies landed files on its own.",
    )
    sub = parser.add_subparsers(dest="engine_command", metavar="SUBCOMMAND")
    sub.required = True
    serve = sub.add_parser("serve", help="run the warm engine in the foreground")
    serve.add_argument("--cadence", type=float, default=2.0,
                       help="seconds between looks at the landing folders (0: only steps handed to it)")
    serve.add_argument("--port", type=int, default=0, help="port of its API (default: a free one)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address its API listens on (default loopback; 0.0.0.0 in a container)")
    serve.add_argument("--url", default=None,
                       help="the URL clients reach it by, written to the home's engine.json "
                            "(default http://HOST:PORT, this host's name for 0.0.0.0)")
    serve.set_defaults(func=cmd_serve)
    status = sub.add_parser("status", help="whether it runs, and what it is doing")
    status.add_argument("--format", choices=FORMATS, default="table")
    status.set_defaults(func=cmd_status)
    stop = sub.add_parser("stop", help="finish the current step, then exit")
    stop.add_argument("--wait", type=float, default=600, help="seconds to wait for it to exit")
    stop.set_defaults(func=cmd_stop)
