"""The SQL endpoint: Spark's Thrift JDBC/ODBC server (HiveServer2 protocol) on the Cumulus
catalog, so beeline, BI tools and any HiveServer2 client read the maps, the views (with
`cumulus view sql`) and the dbt marts over JDBC.

The pyspark package ships the server (jars/spark-hive-thriftserver_2.12-*.jar) but not
sbin/start-thriftserver.sh, so the server is started the way that script does it:
`spark-submit --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2`, with
every setting of the session factory (spark_conf: jars, catalog, warehouse) as --conf,
in the foreground. Its log goes to <home>/logs/sql-server.log.

Authentication: with a password file (<home>/sql_passwords, or $CUMULUS_SQL_PASSWORDS;
`cumulus sql-server --set-password USER` adds a user), the server checks every connection's user
and password (hive.server2.authentication=CUSTOM, with cumulus/java's authenticator,
compiled once per machine into <cache>/jars). Without one it serves the loopback address
only: any other --host is refused, so an endpoint reachable from elsewhere always asks who
you are."""

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
from cumulus.spark.jars import jars_dir, spark_jars
from cumulus.spark.session import spark_conf
from cumulus.store.catalog import pyiceberg_catalog

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
DEFAULT_PORT = 10000  # HiveServer2's
PASSWORDS_ENV = "CUMULUS_SQL_PASSWORDS"
PASSWORDS_FILE = "sql_passwords"  # in the home
AUTHENTICATOR = "cumulus.sqlauth.CumulusPasswordAuthenticator"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PBKDF2_ITERATIONS = 210_000


@dataclass(frozen=True)
class ServerPlan:
    command: list[str]
    env: dict[str, str]
    host: str
    port: int
    log: Path

    passwords: Path | None = None  # the password file the server checks, None: no authentication

    @property
    def jdbc_url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "0.0.0.0") else self.host
        return f"jdbc:hive2://{host}:{self.port}/"


def passwords_file(settings: Settings) -> Path:
    """The SQL endpoint's password file: $CUMULUS_SQL_PASSWORDS, else <home>/sql_passwords."""
    return Path(os.environ.get(PASSWORDS_ENV) or settings.home / PASSWORDS_FILE)


def hash_password(password: str, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS) -> str:
    """`pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>`, as the authenticator checks it."""
    import hashlib
    import secrets

    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations, 32)
    return f"pbkdf2-sha256:{iterations}:{salt.hex()}:{digest.hex()}"


def set_password(settings: Settings, user: str, password: str) -> Path:
    """Add `user` to the password file, or change its password (the file is private: 0600)."""
    if not user or ":" in user or user != user.strip():
        raise SQLServerError(f"bad user name {user!r}: no colon, no surrounding spaces")
    if not password:
        raise SQLServerError("an empty password is refused")
    path = passwords_file(settings)
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in lines if line.split(":", 1)[0] != user]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{line}\n" for line in [*kept, f"{user}:{hash_password(password)}"]))
    tmp.chmod(0o600)
    tmp.replace(path)
    return path


def authenticator_jar() -> Path:
    """The authenticator's jar (cumulus/java), compiled with the JDK's javac against the
    Thrift server of this pyspark, once per machine and source version."""
    import hashlib
    import shutil
    import tempfile
    import zipfile
    from importlib import resources

    import pyspark

    source = resources.files("cumulus") / "java" / "CumulusPasswordAuthenticator.java"
    text = source.read_bytes()
    jar = jars_dir() / f"cumulus-sqlauth-{pyspark.__version__}-{hashlib.sha256(text).hexdigest()[:12]}.jar"
    if jar.is_file():
        return jar
    home = os.environ.get("JAVA_HOME")
    javac = str(Path(home) / "bin" / "javac") if home and (Path(home) / "bin" / "javac").exists() else shutil.which("javac")
    if not javac:
        raise SQLServerError("password authentication compiles its checker once with the JDK's javac, which is not "
                             "installed here: install a JDK 17 (apt install openjdk-17-jdk-headless), or run `make setup`")
    pyspark_jars = Path(pyspark.__file__).parent / "jars"
    classpath = os.pathsep.join(str(j) for j in sorted(pyspark_jars.glob("spark-hive-thriftserver_*.jar")))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "CumulusPasswordAuthenticator.java"
        src.write_bytes(text)
        done = subprocess.run([javac, "--release", "17", "-cp", classpath, "-d", str(Path(tmp) / "classes"), str(src)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SQLServerError(f"javac failed on the password checker: {done.stderr.strip()[:600]}")
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(".tmp")
        with zipfile.ZipFile(partial, "w") as out:
            for cls in sorted((Path(tmp) / "classes").rglob("*.class")):
                out.write(cls, cls.relative_to(Path(tmp) / "classes").as_posix())
        partial.replace(jar)
    return jar


def spark_submit() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


def server_plan(settings: Settings, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> ServerPlan:
    """The spark-submit command and environment of the server (pure: no process started)."""
    conf = spark_conf(settings, app_name="cumulus-sql-server")
    # The server's JDBC sessions do not use spark.jars' child class loader (on a cluster,
    # their catalog lookup fails with ClassNotFoundException: SparkCatalog): the jars go
    # on the driver's own class path there too.
    passwords = passwords_file(settings)
    passwords = passwords if passwords.is_file() else None
    if passwords is None and host not in LOOPBACK:
        raise SQLServerError(
            f"refusing to serve {host} without authentication: add a user first "
            f"(`cumulus --home {settings.home} sql-server --set-password USER`, into {passwords_file(settings)}), "
            "or serve the loopback address only (--host 127.0.0.1)"
        )
    class_path = list(spark_jars(settings.catalog_uri)) + ([authenticator_jar()] if passwords else [])
    conf["spark.driver.extraClassPath"] = os.pathsep.join(map(str, class_path))
    command = [str(spark_submit()), "--class", THRIFT_SERVER_CLASS, "--name", "cumulus-sql-server"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [
        "--hiveconf", f"hive.server2.thrift.bind.host={host}",
        "--hiveconf", f"hive.server2.thrift.port={port}",
    ]
    env = dict(os.environ)
    if passwords:
        command += ["--hiveconf", "hive.server2.authentication=CUSTOM",
                    "--hiveconf", f"hive.server2.custom.authentication.class={AUTHENTICATOR}"]
        env[PASSWORDS_ENV] = str(passwords)
    if settings.is_local:
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return ServerPlan(command, env, host, port, settings.home / "logs" / "sql-server.log", passwords)


def ensure_default_namespace(settings: Settings) -> None:
    """Every JDBC session starts with `USE <database of the URL>`, `default` when the URL
    names none, and the Cumulus catalog is the sessions' current catalog: without a
    `default` namespace there, connecting fails (SCHEMA_NOT_FOUND). An empty one is created
    (PyIceberg, no JVM; idempotent)."""
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
        + (f"  JDBC:     {plan.jdbc_url} (Hive JDBC driver; user and password: -n USER -p PASSWORD, "
           f"users in {plan.passwords})\n" if plan.passwords else
           f"  JDBC:     {plan.jdbc_url} (Hive JDBC driver; no authentication: loopback only)\n") +
        "  Ctrl-C stops the server."
    )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])
