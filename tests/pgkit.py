"""A real PostgreSQL server for the tests: Debian's `postgresql` package (installed by
scripts/setup.sh), a data folder of its own, listening on a free loopback port, with a
user and password and a database for the Iceberg JDBC catalog, stopped at the end. Spark
(the PostgreSQL JDBC driver) and PyIceberg (psycopg2) use it through the same
`catalog_uri`, `catalog_user` and `catalog_password` settings a deployment sets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

USER, PASSWORD, DATABASE = "cumulus", "catalog-secret", "cumulus_catalog"


@dataclass(frozen=True)
class Postgres:
    port: int

    @property
    def catalog_uri(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{DATABASE}"

    def toml(self) -> str:
        """The cumulus.toml lines that put a home's catalog in this server."""
        return f'catalog_uri = "{self.catalog_uri}"\ncatalog_user = "{USER}"\ncatalog_password = "{PASSWORD}"\n'


def server_bin() -> Path | None:
    """The folder of the newest installed server's programs (None: not installed)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh server for the block. PostgreSQL refuses to run as root: as root, its
    programs run as the `postgres` user the package created, in a folder it owns."""
    bin_ = server_bin()
    if bin_ is None:
        raise RuntimeError("PostgreSQL is not installed (scripts/setup.sh installs Debian's postgresql)")
    root = Path(tempfile.mkdtemp(prefix="cumulus-pg-"))
    root.chmod(0o755)
    data, pwfile = root / "data", root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
        shutil.chown(pwfile, "postgres")
    port = _free_port()

    def run(*argv: str) -> None:
        done = subprocess.run([*as_user, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    run(str(bin_ / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth=scram-sha-256",
        "-E", "UTF8", "--no-sync")
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} -c fsync=off"
    run(str(bin_ / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start")
    try:
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        deadline = time.monotonic() + 30
        while True:
            made = subprocess.run([str(bin_ / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, DATABASE],
                                  capture_output=True, text=True, env=env)
            if made.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"createdb failed: {made.stderr}")
            time.sleep(0.5)
        yield Postgres(port)
    finally:
        subprocess.run([*as_user, str(bin_ / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
