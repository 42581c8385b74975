"""What the tests' child processes keep of the test session's environment: the jar folder
and the driver JVM's options (tests/conftest.py sets the quick JIT), but no other
CUMULUS_* setting (a child's home and catalog come from its own cumulus.toml)."""

from __future__ import annotations

import os

KEPT_ENV = ("CUMULUS_JARS_DIR", "CUMULUS_JVM_OPTIONS")


def child_env(drop: tuple[str, ...] = ("CUMULUS_",)) -> dict[str, str]:
    """os.environ without the variables that start with `drop`, but for KEPT_ENV."""
    return {k: v for k, v in os.environ.items() if not k.startswith(drop) or k in KEPT_ENV}
