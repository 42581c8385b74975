"""The warm engine: one long-lived process per home (`cumulus --home H engine serve`) that
keeps one Spark session and the compiled views, runs the pipeline's steps in it, and
picks up landed files on its own.

    steps    the same cumulus.jobs entry points and arguments as spark-submit runs
             (cumulus.pipeline.jobs), one at a time, in this process: no JVM start, the
             views compiled once, the catalog attached once
    landing  every `cadence` seconds with nothing queued: each source's files of the
             open epoch not taken yet are ingested and applied (a micro-batch), so fresh
             values land on main within seconds of a file landing
    API      HTTP on loopback, or on `host` with the URL other hosts reach it by (a
             container: `--host 0.0.0.0 --url http://cumulus-engine:8790`), there only
             with a token ($CUMULUS_ENGINE_TOKEN: every request then carries
             `Authorization: Bearer TOKEN`, as EngineClient sends it); the URL,
             this host's name and the pid are in <home>/engine/engine.json:
               GET  /status                  the engine, its current step, recent steps
               POST /steps {"job", "args"}   queue a step; returns its id
               GET  /steps/ID?offset=N       its state, exit status, log lines from N
               POST /stop                    finish the current step, then exit

Each step's output (its prints and every log record while it runs) is kept with the step,
so an Airflow task that handed its step over shows the same log as a spark-submit would.
Safe to kill at any instant: the tables are the only truth (every step is idempotent and
recovers what a crash left), the queue is not persisted (the Airflow task that queued a
step sees the engine gone and retries), and a new engine resumes from the tables.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hmac
import io
import ipaddress
import itertools
import json
import logging
import os
import queue
import signal
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cumulus.config import Settings
from cumulus.errors import ConfigError, ExitCode
from cumulus.pipeline.jobs import check_job, job_arguments, run_job
from cumulus.store.catalog import pyiceberg_catalog

log = logging.getLogger("cumulus.engine.server")

STATE_FILE = "engine.json"
QUEUED, RUNNING, DONE = "queued", "running", "done"
KEPT_STEPS = 200  # finished steps kept for /steps/ID and /status
TOKEN_VARIABLE = "CUMULUS_ENGINE_TOKEN"  # the warm engine's token, shared by it and its callers


def engine_token() -> str:
    """The warm engine's token ($CUMULUS_ENGINE_TOKEN; empty: none, loopback only)."""
    return os.environ.get(TOKEN_VARIABLE, "").strip()


def state_path(settings: Settings) -> Path:
    return settings.home / "engine" / STATE_FILE


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class Step:
    id: int
    job: str
    args: list[str]
    origin: str  # "api" (a caller queued it) or "landing" (the engine found new files)
    state: str = QUEUED
    exit: int | None = None
    lines: list[str] = field(default_factory=list)
    queued_at: str = field(default_factory=_now)
    started_at: str | None = None
    seconds: float | None = None

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "job": self.job, "args": self.args, "origin": self.origin, "state": self.state,
                "exit": self.exit, "queued_at": self.queued_at, "started_at": self.started_at,
                "seconds": self.seconds, "last_line": self.lines[-1] if self.lines else None}


class _StepOutput(io.TextIOBase):
    """stdout/stderr of a running step: whole lines into the step's log."""

    def __init__(self, step: Step):
        self._step, self._partial = step, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        self._step.lines.extend(lines)
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._step.lines.append(self._partial)
            self._partial = ""


class _StepLog(logging.Handler):
    def __init__(self, step: Step):
        super().__init__(logging.INFO)
        self._step = step
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("py4j", "cumulus.engine.server.http")):
            self._step.lines.append(self.format(record))


class EngineServer:
    """The warm engine of one home (see the module doc). `serve()` blocks until stopped."""

    def __init__(self, settings: Settings, cadence: float = 2.0, port: int = 0, host: str = "127.0.0.1",
                 url: str | None = None):
        self.settings = settings
        self.cadence = cadence
        self._queue: queue.Queue[Step] = queue.Queue()
        self._steps: dict[int, Step] = {}
        self._order: deque[int] = deque()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._current: Step | None = None
        self._resumed = False  # the first landing look also applies every source (_poll_landing)
        self._started = _now()
        self.token = engine_token()
        if not self.token and not _loopback(host):
            raise ConfigError(f"the warm engine serves on {host} (beyond loopback) only with a token: set "
                              f"{TOKEN_VARIABLE} for it and for its callers")
        self._http = ThreadingHTTPServer((host, port), _handler(self))
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        if url is None:  # bound to every interface: other hosts reach it by this host's name
            url = f"http://{socket.gethostname() if host == '0.0.0.0' else host}:{self.port}"
        self.url = url.rstrip("/")

    # ------------------------------------------------------------------ API side

    def submit(self, job: str, args: list[str], origin: str = "api") -> Step:
        check_job(job)
        with self._lock:
            step = Step(next(self._ids), job, [str(a) for a in args], origin)
            self._steps[step.id] = step
            self._order.append(step.id)
            while len(self._order) > KEPT_STEPS:
                old = self._steps[self._order[0]]
                if old.state != DONE:
                    break
                del self._steps[self._order.popleft()]
        self._queue.put(step)
        log.info("step %d queued: %s %s (%s)", step.id, job, " ".join(step.args), origin)
        return step

    def step(self, step_id: int) -> Step | None:
        return self._steps.get(step_id)

    def status(self) -> dict[str, Any]:
        with self._lock:
            recent = [self._steps[i].summary() for i in list(self._order)[-20:]]
        spark = self._engine._spark if hasattr(self, "_engine") else None
        return {
            "home": str(self.settings.home), "pid": os.getpid(), "url": self.url, "started_at": self._started,
            "cadence_s": self.cadence, "queued": self._queue.qsize(),
            "current": self._current.summary() if self._current else None, "steps": recent,
            "spark_ui": spark.sparkContext.uiWebUrl if spark is not None else None,
            "stopping": self._stop.is_set(),
        }

    def stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ the loop

    def serve(self) -> None:
        """Start the session, publish the state file, run steps until stopped."""
        from cumulus.app import Engine

        self._engine = Engine(self.settings, app_name="cumulus-engine").keep_warm()
        self._engine.spark  # noqa: B018 (start the JVM and attach the catalog before saying we are up)
        threading.Thread(target=self._http.serve_forever, name="cumulus-engine-http", daemon=True).start()
        self._write_state()
        threading.Thread(target=_preload, name="cumulus-engine-preload", daemon=True).start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())
        log.info("warm engine for %s on %s (landing every %.0f s); pid %d", self.settings.home, self.url,
                 self.cadence, os.getpid())
        next_poll = time.monotonic()
        try:
            while not self._stop.is_set():
                try:
                    step = self._queue.get(timeout=0.2)
                except queue.Empty:
                    if self.cadence > 0 and time.monotonic() >= next_poll:
                        self._poll_landing()
                        next_poll = time.monotonic() + self.cadence
                    continue
                self._run(step)
        finally:
            self._http.shutdown()
            self._remove_state()
            log.info("warm engine for %s stopped", self.settings.home)

    def _remove_state(self) -> None:
        """Remove the state file if it is still this engine's (another may have started
        since, when this one was taken for dead)."""
        path = state_path(self.settings)
        try:
            mine = json.loads(path.read_text()).get("pid") == os.getpid()
        except (OSError, ValueError):
            return
        if mine:
            path.unlink(missing_ok=True)

    def _write_state(self) -> None:
        path = state_path(self.settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "url": self.url, "port": self.port,
                                   "home": str(self.settings.home), "started_at": self._started}) + "\n")
        tmp.replace(path)

    def _run(self, step: Step) -> None:
        self._current, step.state, step.started_at = step, RUNNING, _now()
        log.info("step %d: %s %s", step.id, step.job, " ".join(step.args))
        handler, out, root = _StepLog(step), _StepOutput(step), logging.getLogger()
        root.addHandler(handler)
        started = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                step.exit = run_job(step.job, step.args)
        except Exception as exc:  # a step must never take the engine down
            log.exception("step %d failed", step.id)
            step.lines.append(f"cumulus: error: the step crashed: {type(exc).__name__}: {exc}")
            step.exit = 3
        finally:
            out.flush()
            root.removeHandler(handler)
            step.seconds = round(time.perf_counter() - started, 2)
            step.state, self._current = DONE, None
        log.info("step %d: %s exited %d in %.1f s", step.id, step.job, step.exit, step.seconds)
        if step.job == "apply" and step.exit == ExitCode.NOT_YET:
            # An earlier epoch was sealed, not closed: the batch waits. Once the close has
            # run, the next landing look applies every source again (no new file would).
            self._resumed = False

    def _poll_landing(self) -> None:
        """Queue ingest + apply for every source with files of the open epoch not taken yet;
        at the first look, an apply of every source too: a batch ingested before a kill (of
        this engine's predecessor, between its ingest and apply) has no new files to
        announce it, and an apply with nothing to do ends in a moment."""
        cfg = self.settings.pipeline
        try:
            from cumulus.ingest.landing import plan_epoch

            plan = plan_epoch(pyiceberg_catalog(self.settings), self.settings, cfg)
        except Exception as exc:  # a home being set up, a catalog briefly locked: next time
            log.debug("landing poll skipped: %s", exc)
            return
        if not self._resumed:
            self._resumed = True
            for work in plan.sources:
                apply, skip = job_arguments("apply", self.settings, cfg, None, work.source, plan=plan)
                if skip is None:
                    log.info("epoch %d source %s: apply what an earlier run may have left", plan.epoch, work.source)
                    self.submit("apply", apply, origin="landing")
        for work in plan.sources:
            ingest, skip = job_arguments("ingest", self.settings, cfg, None, work.source, "microbatch", plan)
            if skip is None:
                apply, _ = job_arguments("apply", self.settings, cfg, None, work.source, plan=plan)
                log.info("epoch %d source %s: new files; ingest and apply", plan.epoch, work.source)
                self.submit("ingest", ingest, origin="landing")
                self.submit("apply", apply, origin="landing")


def _preload() -> None:
    """Import Great Expectations (5-20 s of CPU) while the engine waits for its first
    steps, so that its first validate step does not pay for it."""
    logging.getLogger("great_expectations").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
    started = time.perf_counter()
    try:
        import great_expectations  # noqa: F401
    except Exception as exc:  # the validate step reports it, with its own error
        log.warning("warm engine: cannot import Great Expectations ahead of validation: %s", exc)
        return
    log.info("warm engine: Great Expectations imported ahead of validation (%.1f s)", time.perf_counter() - started)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _handler(server: EngineServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
            logging.getLogger("cumulus.engine.server.http").debug(format, *args)

        def _allowed(self) -> bool:
            """Whether the request carries the engine's token (any request does, without one)."""
            if not server.token:
                return True
            given = self.headers.get("Authorization", "")
            if hmac.compare_digest(given.encode(), f"Bearer {server.token}".encode()):
                return True
            self._send(HTTPStatus.UNAUTHORIZED, {"error": f"a token is required (Authorization: Bearer, "
                                                          f"{TOKEN_VARIABLE})"})
            return False

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            if not self._allowed():
                return None
            path, _, query = self.path.partition("?")
            if path == "/status":
                return self._send(HTTPStatus.OK, server.status())
            if path.startswith("/steps/") and path[len("/steps/"):].isdigit():
                step = server.step(int(path[len("/steps/"):]))
                if step is None:
                    return self._send(HTTPStatus.NOT_FOUND, {"error": "no such step (the engine keeps the last 200)"})
                params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
                offset = int(params.get("offset", "0") or 0)
                lines = step.lines[offset:]
                return self._send(HTTPStatus.OK, {**step.summary(), "lines": lines, "next": offset + len(lines)})
            return self._send(HTTPStatus.NOT_FOUND, {"error": f"no such resource {path}"})

        def do_POST(self) -> None:  # noqa: N802
            if not self._allowed():
                return None
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as exc:
                return self._send(HTTPStatus.BAD_REQUEST, {"error": f"not JSON: {exc}"})
            if self.path == "/stop":
                server.stop()
                return self._send(HTTPStatus.OK, {"stopping": True})
            if self.path == "/steps":
                if server._stop.is_set():
                    return self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the engine is stopping"})
                try:
                    step = server.submit(str(body.get("job")), list(body.get("args") or []))
                except ValueError as exc:
                    return self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
                return self._send(HTTPStatus.ACCEPTED, step.summary())
            return self._send(HTTPStatus.NOT_FOUND, {"error": f"no such resource {self.path}"})

    return Handler
