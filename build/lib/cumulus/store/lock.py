"""One catalog writer at a time: a file lock in the Cumulus home around every step that
commits (init, ingest, fold, ledger transitions, the engine's apply and close).

Two processes committing to the embedded SQLite catalog at once fail (docs/STACK.md), and
ingestion's checks (is this file new? is this tuple alive?) must not interleave with
another writer's commits. The lock is `flock(2)` on `<home>/catalog.lock`: the kernel
releases it when the holder dies, so a crashed step never leaves a stale lock behind.
It is re-entrant inside one process (an ingest that calls fold, a close that writes the
ledger), and threads of one process take turns. It serializes processes on one machine
only; deployments whose writers run on several machines need a lock in the catalog
database instead (not built yet).

Applies are the exception where the catalog takes concurrent commits (PostgreSQL):
`apply_lock` holds the same file *shared* (every other step holds it exclusive, so none
interleaves with an apply) plus the source's own lock, so applies of several sources run
at once, as the paper's sources do; an apply that read a state missing another's deltas
is repaired by the close (cumulus/engine/repair.py). On SQLite it is the catalog lock.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from cumulus.config import Settings
from cumulus.errors import StoreError

LOCK_FILE = "catalog.lock"
log = logging.getLogger("cumulus.lock")

_guard = threading.Lock()
_thread_locks: dict[str, threading.RLock] = {}
_depth: dict[str, int] = {}
_handles: dict[str, IO[str]] = {}


def lock_path(settings: Settings) -> Path:
    return settings.home / LOCK_FILE


def lock_holder(settings: Settings) -> dict | None:
    """Who holds (or last held) the lock: pid, host, purpose, since. None when unknown."""
    try:
        text = lock_path(settings).read_text().strip()
    except OSError:
        return None
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


@contextmanager
def catalog_lock(
    settings: Settings, purpose: str = "", timeout: float | None = None, poll: float = 0.2
) -> Iterator[None]:
    """Hold the home's catalog lock for the block. Waits (logging who holds it every
    10 s) for at most `timeout` seconds (None: no limit), then raises StoreError."""
    path = lock_path(settings)
    key = str(path)
    with _guard:
        rlock = _thread_locks.setdefault(key, threading.RLock())
    deadline = None if timeout is None else time.monotonic() + timeout
    if not rlock.acquire(timeout=-1 if timeout is None else timeout):
        raise StoreError(f"timed out after {timeout} s waiting for the catalog lock {path}")
    try:
        if _depth.get(key, 0) == 0:
            _handles[key] = _acquire_file(settings, path, purpose, deadline, poll)
        _depth[key] = _depth.get(key, 0) + 1
        try:
            yield
        finally:
            _depth[key] -= 1
            if _depth[key] == 0:
                handle = _handles.pop(key)
                try:
                    handle.seek(0)
                    handle.truncate()
                    handle.flush()
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    handle.close()
    finally:
        rlock.release()


@contextmanager
def apply_lock(settings: Settings, source_id: int, purpose: str = "") -> Iterator[None]:
    """The lock of one source's apply (see the module doc): the catalog lock, unless the
    catalog takes concurrent commits; then the catalog lock shared (exclusive holders,
    every other step, wait for the applies and the applies for them) and the source's own
    lock (its applies take turns). Inside a process holding the catalog lock, the catalog
    lock (re-entrant)."""
    if settings.is_sqlite or _depth.get(str(lock_path(settings)), 0):
        with catalog_lock(settings, purpose):
            yield
        return
    mine = _acquire_file(settings, settings.home / f"apply-{source_id}.lock", purpose, None, 0.2)
    try:
        shared = _acquire_file(settings, lock_path(settings), purpose, None, 0.2, exclusive=False)
        try:
            yield
        finally:
            fcntl.flock(shared, fcntl.LOCK_UN)
            shared.close()
    finally:
        fcntl.flock(mine, fcntl.LOCK_UN)
        mine.close()


def _acquire_file(
    settings: Settings, path: Path, purpose: str, deadline: float | None, poll: float, exclusive: bool = True,
) -> IO[str]:
    """`path` locked (flock; shared: the holder's note is not written, several hold it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - kept open while the lock is held
    waited_since = time.monotonic()
    last_report = waited_since
    try:
        while True:
            try:
                fcntl.flock(handle, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise StoreError(
                        f"timed out waiting for the catalog lock {path}, held by "
                        f"{_describe(lock_holder(settings))}; if that process is gone, the "
                        "lock is already free: try again"
                    ) from None
                if now - last_report >= 10:
                    log.info(
                        "waiting %.0f s for the catalog lock (held by %s)",
                        now - waited_since,
                        _describe(lock_holder(settings)),
                    )
                    last_report = now
                time.sleep(poll)
        if not exclusive:
            return handle
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "purpose": purpose,
                    "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                }
            )
        )
        handle.flush()
        return handle
    except BaseException:
        handle.close()
        raise


def _describe(holder: dict | None) -> str:
    if not holder:
        return "another process"
    what = f" ({holder['purpose']})" if holder.get("purpose") else ""
    return f"pid {holder.get('pid')} on {holder.get('host')}{what} since {holder.get('since')}"
