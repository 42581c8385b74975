"""The catalog lock: one holder across processes, re-entrant inside one, released when
its holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from cumulus.config import Settings
from cumulus.errors import StoreError
from cumulus.store.lock import catalog_lock, lock_holder

HOLD = """
import sys, time
from cumulus.config import Settings
from cumulus.store.lock import catalog_lock
with catalog_lock(Settings(home=sys.argv[1]), "test holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def holder(home, seconds):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(home), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_reentrant_in_one_process(tmp_path):
    settings = Settings(home=tmp_path)
    with catalog_lock(settings, "outer"):
        with catalog_lock(settings, "inner"):
            assert lock_holder(settings)["purpose"] == "outer"
        assert lock_holder(settings)["pid"] == os.getpid()
    assert lock_holder(settings) is None


def test_other_process_waits_and_times_out(tmp_path):
    settings = Settings(home=tmp_path)
    proc = holder(tmp_path, 30)
    try:
        assert lock_holder(settings)["purpose"] == "test holder"
        started = time.monotonic()
        with pytest.raises(StoreError, match="held by pid .*test holder"):
            with catalog_lock(settings, timeout=0.5):
                pass
        assert time.monotonic() - started < 5
    finally:
        proc.kill()
        proc.wait()


def test_released_when_the_holder_is_killed(tmp_path):
    settings = Settings(home=tmp_path)
    proc = holder(tmp_path, 300)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with catalog_lock(settings, "after", timeout=5):
        assert lock_holder(settings)["purpose"] == "after"
