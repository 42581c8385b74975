"""Named fault points for crash tests: `CUMULUS_FAULT=<point>:<action>` makes the ingest
job exit abruptly (`exit`: os._exit, no cleanup, like a killed process), raise
(`raise`), or sleep (`sleep:<seconds>`, for a kill from outside) when it reaches the
point. Several specs may be given, comma-separated. `CUMULUS_FAULT_FILE`, if set, is
created when a point fires (tests wait for it before killing).

Points of an ingest batch, in order: after-plan (files listed and checksummed, not yet
parsed), before-commit (validated, nothing written),
after-quarantine, between-relations (one events table appended, others not),
after-events (every events append done, manifest not written), after-manifest.

A test may also run code of its own at a point, in its process (`on_fault_point`): the
parallel-applies test makes its sources meet there, so their applies overlap.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ENV = "CUMULUS_FAULT"
FILE_ENV = "CUMULUS_FAULT_FILE"
EXIT_CODE = 86
log = logging.getLogger("cumulus.faults")


class InjectedFault(RuntimeError):
    """Raised at a fault point by CUMULUS_FAULT=<point>:raise."""


_HOOKS: dict[str, Callable[[], None]] = {}


def on_fault_point(name: str, hook: Callable[[], None] | None) -> None:
    """Run `hook` whenever this process reaches the point `name` (None: no longer)."""
    if hook is None:
        _HOOKS.pop(name, None)
    else:
        _HOOKS[name] = hook


def fault_point(name: str) -> None:
    hook = _HOOKS.get(name)
    if hook is not None:
        hook()
    spec = os.environ.get(ENV)
    if not spec:
        return
    for item in spec.split(","):
        point, _, action = item.strip().partition(":")
        if point != name:
            continue
        marker = os.environ.get(FILE_ENV)
        if marker:
            Path(marker).write_text(name)
        log.warning("fault point %s: %s", name, action or "exit")
        if action.startswith("sleep"):
            time.sleep(float(action.partition(":")[2] or 3600))
        elif action == "raise":
            raise InjectedFault(f"injected fault at {name}")
        else:
            sys.stderr.flush()
            os._exit(EXIT_CODE)
