"""Shared fixtures for every test tier.

`settings` is a Cumulus home in a temporary folder (no JVM); `spark` is one SparkSession
per pytest process (one per xdist worker) on that home (master local[2]), built by the session factory. Any test
that uses `spark`, or lives in tests/spark/, is marked `spark`, so the unit tier
(`-m "not spark and not airflow and not e2e"`) never starts a JVM.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from envkit import KEPT_ENV

from cumulus.config import Settings
from cumulus.spark.session import QUICK_JIT

TESTS = Path(__file__).resolve().parent


# The longest test files, longest first (minutes each on 2 cores): they start first, so
# the longest does not start last (the order is the scheduler's below). The files after
# them go by their number of selected tests, most first; the suite's many short tests fill
# the time the Airflow and kill-loop tests spend waiting. A file missing here only runs
# later; a wrong order costs minutes, never a result.
LONGEST_FIRST = [
    "engine/test_kill_loop.py", "engine/test_epochs.py", "airflow/test_epoch_dag.py",
    "airflow/test_airflow_standalone.py", "engine/test_full_refresh.py", "engine/test_cluster.py",
    "engine/test_parallel_applies.py", "engine/test_repair_and_faults.py", "platform/test_wheel.py",
    "airflow/test_warm_engine.py",
]


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    # Before `-m` deselects (the `spark` marker must be there), then the order of what is left.
    for item in items:
        in_spark_dir = (TESTS / "spark") in Path(str(item.path)).parents
        if in_spark_dir or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    result = yield
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    per_file = Counter(item.nodeid.split("::")[0] for item in items)

    def order(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        return rank.get(path.removeprefix("tests/"), len(rank)), -per_file[path]

    items.sort(key=order)
    return result


# Files that share a session fixture's costly home (tests/sqlreads/conftest.py's
# tpch_home, 50-90 s to build) run on one worker, so that it is built once, not once
# per worker.
ONE_WORKER = [("sqlreads/test_view_sql.py", "sqlreads/test_dbt_project.py", "sqlreads/test_sql_server.py")]


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile` (a file's tests on one worker) in the order above, each worker
    holding one file ahead at most. pytest-xdist's own gives a worker another file once
    two or fewer of its tests are left (xdist/scheduler/loadscope.py), and reorders files
    by their number of tests: the kill loop started minutes late, and a worker ending a
    file of several tests took two single-test files (minutes each) behind it; the other
    worker then idled 5 of the slow tier's 17 minutes. A worker still needs one test
    ahead of the one it runs (it tears fixtures down by the next), so one is kept. The
    files of each ONE_WORKER group make one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OneFileAhead(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0].removeprefix("tests/")
            return next((" + ".join(files) for files in ONE_WORKER if path in files), super()._split_scope(nodeid))

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    config.option.loadscopereorder = False  # the order is pytest_collection_modifyitems'
    return OneFileAhead(config, log)


# The driver JVMs of the tests (this process's and every process it starts) compile with
# C1 only: their Spark jobs are many, tiny and short, so C2's compilations cost more CPU
# than they save (about 30% of the kill loop's CPU time; docs/STACK.md, "A cold JVM").
# The parallel collector, not G1: no concurrent marking beside the work on two cores
# (the TPC-H stream test: 113-124 CPU-s against G1's 125-131; the class-data archive,
# dumped under G1, maps all the same).
TEST_JVM_OPTIONS = f"{QUICK_JIT} -XX:+UseParallelGC"
# The session of each pytest process evaluates without generated code: it runs thousands
# of queries of a few rows each, most of a shape of their own, and compiling each one's
# Java (Janino, then the JIT) cost more CPU than running it interpreted: 12-15% of the
# in-process Spark tests' CPU time (test_evaluate*, test_epochs; docs/testing.md). Results
# are the same (Spark falls back to these paths itself where code generation fails). The
# processes the tests start (CLI, jobs, engine, kill loops) keep Spark's defaults, as the
# product does: a short-lived JVM gains nothing from this, and its class-data archive
# holds the code generator's classes.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@pytest.fixture(scope="session", autouse=True)
def _hermetic_env() -> Iterator[None]:
    """Settings must not come from the developer's shell (CUMULUS_HOME, CUMULUS_CATALOG_URI...)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if n.startswith("CUMULUS_") and n not in KEPT_ENV]:
            mp.delenv(name)
        mp.setenv("CUMULUS_JVM_OPTIONS", os.environ.get("CUMULUS_JVM_OPTIONS", TEST_JVM_OPTIONS))
        yield


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A fresh Cumulus home (catalog.db, warehouse/) shared by the whole test session."""
    return Settings(home=tmp_path_factory.mktemp("cumulus-home"), spark_master="local[2]")


@pytest.fixture(scope="session")
def spark(settings: Settings):
    """The session-wide SparkSession on `settings`' catalog (the default catalog)."""
    from cumulus.spark.session import spark_session

    session = spark_session(settings, app_name="cumulus-tests", extra_conf=INTERPRETED)
    yield session
    session.stop()
