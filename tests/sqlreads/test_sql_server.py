"""`cumulus sql-server` end to end: the Spark Thrift server starts on a free loopback port
on the tiny home, beeline (the HiveServer2 Thrift protocol over JDBC) runs `cumulus view
sql` queries at tag epoch-1, and their rows equal `Reader.read_view`; SIGTERM stops the
server cleanly and frees the port."""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest
from sqlreadskit import SCALAR_VIEW

from cumulus.output import sort_key
from cumulus.read import At, Reader
from cumulus.sql.mapsql import view_sql
from cumulus.sqlserver import PASSWORDS_ENV, port_open

# The slow tier: they share the tiny TPC-H home (sqlreadskit), built once per run.
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
VIEWS = ["pricing_summary", SCALAR_VIEW[0]]  # decimals, doubles, dates, counts, MIN/MAX; no GROUP BY


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(proc: subprocess.Popen, text: str, timeout: float) -> list[str]:
    """Lines the server printed up to the one containing `text` (a thread reads its
    output, so a silent server cannot block the test past `timeout`)."""
    lines: list[str] = []
    seen = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if text in line:
                seen.set()

    threading.Thread(target=pump, daemon=True).start()
    if not seen.wait(timeout):
        raise AssertionError(f"no {text!r} from the server within {timeout} s:\n" + "\n".join(lines))
    return lines


def typed(text: str, like):
    """A beeline CSV cell as the Python type the reader gives for that column."""
    if text == "NULL":
        return None
    if isinstance(like, Decimal):
        return Decimal(text)
    if isinstance(like, float):
        return float(text)
    if isinstance(like, int):
        return int(text)
    if isinstance(like, dt.date):
        return dt.date.fromisoformat(text)
    return text


def beeline(port: int, sql_file: Path, user: str, password: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "beeline"), "-u", f"jdbc:hive2://127.0.0.1:{port}/", "-n", user, "-p", password,
         "--silent=true", "--outputformat=csv2", "--showHeader=true", "-f", str(sql_file)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},  # beeline finds Spark by the venv's python
    )


def beeline_results(port: int, sql_file: Path, user: str, password: str) -> list[list[list[str]]]:
    """Each statement's result (header + rows) of `beeline -f`, CSV output."""
    out = beeline(port, sql_file, user, password)
    assert out.returncode == 0, out.stderr[-3000:]
    results: list[list[list[str]]] = []
    for row in csv.reader(io.StringIO(out.stdout)):
        if not row:
            continue
        if row[0] in ("returnflag", "orders"):  # a statement's header
            results.append([])
        results[-1].append(row)
    return results


def test_sql_server_serves_views_at_a_tag_to_its_users_only(tpch_home, tmp_path) -> None:
    """With a password file the server asks every connection who it is (cumulus/java's
    authenticator): a user with its password reads the views, a wrong password is refused."""
    reader = Reader(tpch_home)
    port = free_port()
    env = {**os.environ, PASSWORDS_ENV: str(tmp_path / "sql_passwords")}
    added = subprocess.run([str(BIN / "cumulus"), "--home", str(tpch_home.home), "sql-server", "--set-password", "ana"],
                           input="s3cret-pass\n", capture_output=True, text=True, env=env, timeout=60)
    assert added.returncode == 0 and "user ana set" in added.stdout, added.stderr
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(BIN / "cumulus"), "--home", str(tpch_home.home), "sql-server", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True, env=env,
    )
    try:
        lines = wait_for(proc, "ready", timeout=150)
        assert any(f"jdbc:hive2://localhost:{port}/" in line for line in lines)
        assert any("user and password" in line for line in lines), lines
        ready_s = time.monotonic() - started
        sql_file = tmp_path / "views.sql"
        sql_file.write_text("".join(
            view_sql(reader.compilation, name, 1, catalog=tpch_home.catalog).rstrip() + ";\n" for name in VIEWS
        ))
        refused = beeline(port, sql_file, "ana", "s3cret")
        assert refused.returncode != 0 and "Peer indicated failure" in refused.stdout + refused.stderr, refused.stderr[-2000:]
        results = beeline_results(port, sql_file, "ana", "s3cret-pass")
        assert len(results) == len(VIEWS)
        for name, (header, *rows) in zip(VIEWS, results, strict=True):
            expected = reader.read_view(name, At(1))
            assert tuple(header) == reader.view_columns(name), name
            assert len(rows) == len(expected), name
            got = [tuple(typed(c, e) for c, e in zip(row, expected[0], strict=True)) for row in rows]
            assert sorted(got, key=sort_key) == expected, name
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    time.sleep(0.5)  # the reader thread takes the last lines
    assert proc.returncode == 0, "\n".join(lines)
    assert "stopped" in lines[-1], "\n".join(lines)
    assert not port_open("127.0.0.1", port)
    print(f"sql-server ready in {ready_s:.1f} s")
