"""Talking to a home's warm engine (cumulus.pipeline.server): find it from its state file,
hand it a step, follow the step's log until it exits. Standard library only, so an
Airflow worker needs nothing more."""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from cumulus.config import Settings
from cumulus.errors import CumulusError, EngineUnavailable
from cumulus.pipeline.server import engine_token, state_path

log = logging.getLogger("cumulus.engine.client")
BUSY_PATIENCE_S = 30.0  # how long a live engine that does not answer is asked again (find_engine)


class EngineClient:
    def __init__(self, url: str, timeout: float = 5.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if token := engine_token():
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
            raise CumulusError(f"the warm engine at {self.url} refused {method} {path}: {detail}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            raise EngineUnavailable(f"the warm engine at {self.url} does not answer ({exc})") from None

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/status")

    def submit(self, job: str, args: list[str]) -> int:
        return int(self._call("POST", "/steps", {"job": job, "args": args})["id"])

    def stop(self) -> None:
        self._call("POST", "/stop", {})

    def step(self, step_id: int, offset: int = 0) -> dict[str, Any]:
        """A step's state, exit status and its log lines from `offset` (`next`: the offset after them)."""
        return self._call("GET", f"/steps/{step_id}?offset={offset}")

    def follow(self, step_id: int, echo: Callable[[str], None], poll: float = 0.5,
               seconds: float | None = None) -> int | None:
        """Pass the step's log lines to `echo` as they come; its exit status, or None if
        it is still running after `seconds` (None: wait as long as it runs)."""
        offset, deadline = 0, None if seconds is None else time.monotonic() + seconds
        while deadline is None or time.monotonic() < deadline:
            got = self.step(step_id, offset)
            for line in got["lines"]:
                echo(line)
            offset = got["next"]
            if got["state"] == "done":
                return int(got["exit"])
            time.sleep(poll)
        return None

    def run(self, job: str, args: list[str], echo: Callable[[str], None]) -> int:
        return self.follow(self.submit(job, args), echo)  # type: ignore[return-value] (no deadline)


def engine_state(settings: Settings) -> dict[str, Any] | None:
    """The engine's state file, unless it is stale: written on this host by a process
    that is gone (or by this very process: a restarted container reuses pids). Written on
    another host (an engine in its own container), only its answer tells: find_engine."""
    import socket

    path = state_path(settings)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if state.get("host", socket.gethostname()) != socket.gethostname():
        return state
    try:
        pid = int(state["pid"])
        if pid == os.getpid():
            return None
        os.kill(pid, 0)
    except (OSError, KeyError, ValueError):
        return None  # killed without cleaning up: stale
    return state


def find_engine(settings: Settings, patience: float = BUSY_PATIENCE_S) -> EngineClient | None:
    """A client of the home's warm engine when one is running and answers, else None.

    An engine whose state file names a live process may be slow to answer while its steps
    and Airflow share a small machine (a 3 s status call timed out under load, and the
    step then ran the spark-submit way beside the engine: issue 46): it is asked again
    for `patience` seconds before a caller goes around it. A file left by a process that
    is gone is no engine at once (engine_state)."""
    state = engine_state(settings)
    if state is None:
        return None
    client = EngineClient(state["url"], timeout=3.0)
    deadline = time.monotonic() + patience
    while True:
        try:
            status = client.status()
            break
        except EngineUnavailable as exc:
            if time.monotonic() >= deadline or engine_state(settings) is None:
                log.warning("%s for %.0f s: the step runs without it", exc, patience)
                return None
            log.info("%s yet (busy?); asking again", exc)
            time.sleep(1.0)
        except CumulusError:
            return None
    if status.get("home") != str(settings.home):  # a stale file's address, now another home's engine
        return None
    return EngineClient(state["url"])
