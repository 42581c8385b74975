"""A real Spark standalone cluster for the tests: a master and workers started on loopback
with `spark-class` (from the pyspark package: the same Spark as the driver), each with a
work folder of its own, stopped at the end. A home whose `spark_master` is the master's
URL runs its steps as applications of the cluster: tasks (and their Python workers) in
the workers' executors, the warehouse on the machine's shared disk.

    with standalone_cluster(tmp_path, workers=2) as cluster:
        ... spark_master = cluster.url ...
        cluster.tasks_per_worker()   # tasks each worker's executors ran, from their logs
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    ui: str  # the master's web UI (its /json/ says which workers are alive)
    work_dirs: tuple[Path, ...]  # one per worker: app-*/<executor id>/stderr

    def status(self) -> dict:
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=10) as resp:
            return json.loads(resp.read())

    def tasks_per_worker(self) -> list[int]:
        """How many tasks the executors of each worker ran (their logs' `Running task`)."""
        return [sum(log.read_text(errors="replace").count("Running task")
                    for log in work.glob("app-*/*/stderr")) for work in self.work_dirs]


def cluster_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOG_DIR": str(root / "logs"), "SPARK_NO_DAEMONIZE": "1"})
    return env


@contextmanager
def standalone_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                       timeout: float = 120) -> Iterator[Cluster]:
    """A master and `workers` workers of `cores` cores each, up (every worker registered
    with the master) for the block, then stopped."""
    root.mkdir(parents=True, exist_ok=True)
    env = cluster_env(root)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port = _free_port(), _free_port()
    url, ui = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
    procs: list[subprocess.Popen] = []
    logs = []

    def start(name: str, argv: list[str]) -> None:
        log = open(root / f"{name}.log", "w")  # noqa: SIM115 - open while the process runs
        logs.append(log)
        procs.append(subprocess.Popen([spark_class, *argv], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))

    work_dirs = tuple(root / f"worker-{k}" for k in range(workers))
    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(ui_port)])
        for k, work in enumerate(work_dirs):
            work.mkdir(exist_ok=True)
            start(f"worker-{k}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                  "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
                                  "--webui-port", str(_free_port()), url])
        cluster = Cluster(url, ui, work_dirs)
        deadline = time.monotonic() + timeout
        while True:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"the cluster's {dead} ended; see {root}/*.log")
            try:
                if cluster.status().get("aliveworkers", 0) == workers:
                    break
            except OSError:
                pass  # the master is not listening yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"{workers} workers did not register in {timeout:.0f} s; see {root}/*.log")
            time.sleep(0.5)
        yield cluster
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
        for log in logs:
            log.close()
