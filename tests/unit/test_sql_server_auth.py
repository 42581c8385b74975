"""The SQL endpoint's authentication, without starting it: an address other than the
loopback is refused without users; with a password file the server's command asks the
Thrift server for CUSTOM authentication by cumulus/java's checker (compiled once here);
the file holds PBKDF2 hashes, private to its owner. The check itself, against a running
server: tests/sqlreads/test_sql_server.py."""

from __future__ import annotations

import hashlib
import shutil
import stat

import pytest

from cumulus.config import load_settings
from cumulus.errors import SQLServerError
from cumulus.sqlserver import AUTHENTICATOR, PASSWORDS_ENV, hash_password, server_plan, set_password


def test_no_users_serves_the_loopback_only(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(PASSWORDS_ENV, raising=False)
    settings = load_settings(tmp_path)
    with pytest.raises(SQLServerError, match="refusing to serve 0.0.0.0 without authentication"):
        server_plan(settings, "0.0.0.0")
    plan = server_plan(settings, "127.0.0.1")
    assert plan.passwords is None and not any("authentication" in part for part in plan.command)


@pytest.mark.skipif(shutil.which("javac") is None, reason="the checker is compiled with javac (make setup)")
def test_users_turn_on_the_password_check(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(PASSWORDS_ENV, raising=False)
    settings = load_settings(tmp_path)
    path = set_password(settings, "ana", "first")
    set_password(settings, "bo", "other")
    set_password(settings, "ana", "second")  # replaces ana's line
    lines = path.read_text().splitlines()
    assert [line.split(":")[0] for line in lines] == ["bo", "ana"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    user, scheme, rounds, salt, digest = lines[1].split(":")
    assert scheme == "pbkdf2-sha256" and int(rounds) >= 200_000
    assert hashlib.pbkdf2_hmac("sha256", b"second", bytes.fromhex(salt), int(rounds), 32).hex() == digest
    assert hash_password("second", bytes.fromhex(salt), int(rounds)) == ":".join(lines[1].split(":")[1:])
    with pytest.raises(SQLServerError):
        set_password(settings, "a:b", "x")

    plan = server_plan(settings, "0.0.0.0")
    assert plan.passwords == path and plan.env[PASSWORDS_ENV] == str(path)
    assert "hive.server2.authentication=CUSTOM" in plan.command
    assert f"hive.server2.custom.authentication.class={AUTHENTICATOR}" in plan.command
    class_path = next(c for c in plan.command if c.startswith("spark.driver.extraClassPath="))
    assert "cumulus-sqlauth-" in class_path
