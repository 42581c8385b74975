"""The SQL endpoint: Spark's Thrift JDBC/ODBC server (HiveServer2 protocol) on the Cumulus
catalog, so beeline, BI tools and any HiveServer2 client read the maps, the views (with
`cumulus view sql`) and the dbt marts over JDBC.

The pyspark package ships the server (jars/spark-hive-thriftserver_2.12-*.jar) but not
sbin/start-thriftserver.sh, so the server is started the way that script does it:
`spark-submit --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2`, with
every setting of the session factory (spark_conf: jars, catalog, warehouse) as --conf,
in the foreground. Its log goes to <home>/logs/sql-server.log."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cumulus.config import Settings
from cumulus.errors import SQLServerError

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
DEFAULT_PORT = 10000  # HiveServer2's


@dataclass(frozen=True)
class ServerPlan:
    command: list[str]
    env: dict[str, str]
    host: str
    port: int
    log: Path

    @property
    def jdbc_url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "0.0.0.0") else self.host
        return f"jdbc:hive2://{host}:{self.port}/"


def spark_submit() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


def server_plan(settings: Settings, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> ServerPlan:
    """The spark-submit command and environment of the server (pure: no process started)."""
    from cumulus.spark.jars import spark_jars
    from cumulus.spark.session import spark_conf

    conf = spark_conf(settings, app_name="cumulus-sql-server")
    # The server's JDBC sessions do not use spark.jars' child class loader (on a cluster,
    # their catalog lookup fails with ClassNotFoundException: SparkCatalog): the jars go
    # on the driver's own class path there too.
    conf["spark.driver.extraClassPath"] = os.pathsep.join(map(str, spark_jars(settings.catalog_uri)))
    command = [str(spark_submit()), "--class", THRIFT_SERVER_CLASS, "--name", "cumulus-sql-server"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [
        "--hiveconf", f"hive.server2.thrift.bind.host={host}",
        "--hiveconf", f"hive.server2.thrift.port={port}",
    ]
    env = dict(os.environ)
    if settings.is_local:
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return ServerPlan(command, env, host, port, settings.home / "logs" / "sql-server.log")


def ensure_default_namespace(settings: Settings) -> None:
    """Every JDBC session starts with `USE <database of the URL>`, `default` when the URL
    names none, and the Cumulus catalog is the sessions' current catalog: without a
    `default` namespace there, connecting fails (SCHEMA_NOT_FOUND). An empty one is created
    (PyIceberg, no JVM; idempotent)."""
    from cumulus.store.catalog import pyiceberg_catalog

    pyiceberg_catalog(settings).create_namespace_if_not_exists("default")


def port_open(host: str, port: int) -> bool:
    target = "127.0.0.1" if host == "0.0.0.0" else host
    try:
        with socket.create_connection((target, port), timeout=1):
            return True
    except OSError:
        return False


def serve(settings: Settings, host: str, port: int, timeout: float = 180.0, out=sys.stdout) -> int:
    """Run the server in the foreground until Ctrl-C / SIGTERM (or it dies); 0 on a clean stop."""
    from cumulus.store.home import load_home_schema

    load_home_schema(settings)  # refuse an uninitialized home with the usual message
    ensure_default_namespace(settings)
    plan = server_plan(settings, host, port)
    if port_open(host, port):
        raise SQLServerError(f"port {port} on {host} is already in use: pick another with --port")
    plan.log.parent.mkdir(parents=True, exist_ok=True)
    print(f"cumulus sql-server: starting Spark's Thrift server on {host}:{port} for the home "
          f"{settings.home} (catalog {settings.catalog}); log: {plan.log}", file=out, flush=True)
    started = time.monotonic()
    with plan.log.open("ab") as log:
        proc = subprocess.Popen(plan.command, env=plan.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=settings.home)
    stopping = False

    def stop(signum, frame):  # forward SIGTERM/SIGINT to the server, then wait for it
        nonlocal stopping
        stopping = True
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not port_open(host, port):
            if proc.poll() is not None or stopping:
                break
            if time.monotonic() - started > timeout:
                stop(None, None)
                break
            time.sleep(0.5)
        if proc.poll() is None and not stopping:
            print(_ready_text(plan, settings, time.monotonic() - started), file=out, flush=True)
        while proc.poll() is None:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                continue
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stopping:
        print("cumulus sql-server: stopped", file=out, flush=True)
        return 0
    raise SQLServerError(
        f"the Thrift server exited with {proc.returncode} "
        f"{'before listening' if time.monotonic() - started < timeout else 'after ' + str(timeout) + ' s without listening'}"
        f"; the end of {plan.log}:\n{_tail(plan.log)}"
    )


def _ready_text(plan: ServerPlan, settings: Settings, seconds: float) -> str:
    venv = Path(sys.executable).parent
    return (
        f"cumulus sql-server: ready in {seconds:.0f} s: {plan.jdbc_url}\n"
        f"  beeline:  PATH={venv}:$PATH beeline -u {plan.jdbc_url} -e 'SHOW TABLES IN maps'\n"
        f"  a view:   cumulus --home {settings.home} view sql NAME --epoch N > view.sql; "
        f"beeline -u {plan.jdbc_url} -f view.sql\n"
        f"  JDBC:     {plan.jdbc_url} (Hive JDBC driver; no user or password)\n"
        "  Ctrl-C stops the server."
    )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])
