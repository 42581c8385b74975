"""Run one step on many tables at once. An epoch touches tens of map tables and each
touch (an append, a MERGE, a tag) is a small Spark job plus a catalog commit: mostly
scheduling and commit latency, not CPU. Spark accepts jobs from several driver threads
(PySpark's pinned-thread mode gives each Python thread its own JVM thread, so the
thread-local commit properties stay per statement), and commits to different tables do
not conflict, so a small thread pool cuts a step's wall time several-fold
(docs/engine.md has the measurement)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("cumulus.parallel")


def for_each(fn: Callable[[T], R], items: Iterable[T], workers: int, what: str = "tables") -> dict[T, R]:
    """{item: fn(item)} for every item, `workers` at a time. The first failure is raised
    once the running calls have finished (queued ones are cancelled): no step is left
    half-submitted behind the caller's back, and a retry resumes from the tables."""
    todo = list(items)
    if workers <= 1 or len(todo) <= 1:
        return {item: fn(item) for item in todo}
    results: dict[T, R] = {}
    with ThreadPoolExecutor(max_workers=min(workers, len(todo)), thread_name_prefix="cumulus") as pool:
        futures = {pool.submit(fn, item): item for item in todo}
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()
        wait(pending)
        for future in futures:
            if future.cancelled():
                continue
            exc = future.exception()
            if exc is not None:
                log.error("%s: %s failed: %s", what, futures[future], exc)
                raise exc
            results[futures[future]] = future.result()
    return results
