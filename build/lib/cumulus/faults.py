"""Named fault points for crash tests: `CUMULUS_FAULT=<point>:<action>` makes the ingest
job exit abruptly (`exit`: os._exit, no cleanup, like a killed process), raise
(`raise`), or sleep (`sleep:<seconds>`, for a kill from outside) when it reaches the
point. Several specs may be given, comma-separated. `CUMULUS_FAULT_FILE`, if set, is
created when a point fires (tests wait for it before killing).

Points of an ingest batch, in order: after-plan (files listed and checksummed, not yet
parsed), before-commit (validated, nothing written),
after-quarantine, between-relations (one events table appended, others not),
after-events (every events append done, manifest not written), after-manifest.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

ENV = "CUMULUS_FAULT"
FILE_ENV = "CUMULUS_FAULT_FILE"
EXIT_CODE = 86
log = logging.getLogger("cumulus.faults")


class InjectedFault(RuntimeError):
    """Raised at a fault point by CUMULUS_FAULT=<point>:raise."""


def fault_point(name: str) -> None:
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
