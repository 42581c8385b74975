"""Shared fixtures for every test tier.

`settings` is a Cumulus home in a temporary folder (no JVM); `spark` is one SparkSession
for the whole run on that home (master local[2]), built by the session factory. Any test
that uses `spark`, or lives in tests/spark/, is marked `spark`, so the unit tier
(`-m "not spark and not airflow and not e2e"`) never starts a JVM.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cumulus.config import Settings

TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        in_spark_dir = (TESTS / "spark") in Path(str(item.path)).parents
        if in_spark_dir or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session", autouse=True)
def _hermetic_env() -> Iterator[None]:
    """Settings must not come from the developer's shell (CUMULUS_HOME, CUMULUS_CATALOG_URI...)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if n.startswith("CUMULUS_") and n != "CUMULUS_JARS_DIR"]:
            mp.delenv(name)
        yield


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A fresh Cumulus home (catalog.db, warehouse/) shared by the whole test session."""
    return Settings(home=tmp_path_factory.mktemp("cumulus-home"), spark_master="local[2]")


@pytest.fixture(scope="session")
def spark(settings: Settings):
    """The session-wide SparkSession on `settings`' catalog (the default catalog)."""
    from cumulus.spark.session import spark_session

    session = spark_session(settings, app_name="cumulus-tests")
    yield session
    session.stop()
