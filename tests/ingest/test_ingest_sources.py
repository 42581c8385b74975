"""Sources in cumulus.toml: declared, listed, checked; the settings loader ignores the
[sources] and [ingest] tables it does not own."""

from __future__ import annotations

import pytest
from ingestkit import write

from cumulus.cli import main
from cumulus.config import load_settings
from cumulus.errors import ConfigError, ExitCode
from cumulus.ingest.sources import add_source, default_max_error_rate, get_source, load_sources


def test_add_and_list(tmp_path, capsys):
    settings = load_settings(tmp_path)
    a = add_source(settings, "pos", 1)
    assert a.landing == tmp_path / "landing" / "pos" and a.landing.is_dir()
    b = add_source(settings, "web", 7, landing=tmp_path / "drop", max_error_rate=0.1)
    assert (b.priority, b.landing, b.max_error_rate) == (7, tmp_path / "drop", 0.1)
    assert sorted(load_sources(settings)) == ["pos", "web"]
    assert load_settings(tmp_path).catalog == "cumulus"  # settings still load
    assert main(["--home", str(tmp_path), "source", "list", "--format", "csv"]) == ExitCode.NOT_A_HOME
    capsys.readouterr()
    write(tmp_path / "schema.sql", "CREATE TABLE r (a INT);\n")  # what `cumulus init` writes first
    assert main(["--home", str(tmp_path), "source", "list", "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "source,priority,landing,max_error_rate"
    assert out[1].startswith("pos,1,") and out[2].startswith("web,7,")


def test_priorities_and_names_are_unique(tmp_path):
    settings = load_settings(tmp_path)
    add_source(settings, "pos", 1)
    with pytest.raises(ConfigError, match="already declared"):
        add_source(settings, "pos", 2)
    with pytest.raises(ConfigError, match="priority 1 is already the priority of source pos"):
        add_source(settings, "web", 1)
    with pytest.raises(ConfigError, match="bad source name"):
        add_source(settings, "Web Shop", 3)
    with pytest.raises(ConfigError, match="unknown source 'web'.*declared: pos"):
        get_source(settings, "web")


def test_config_checks(tmp_path):
    settings = load_settings(tmp_path)
    write(tmp_path / "cumulus.toml", "[ingest]\nmax_error_rate = 0.2\n[sources.a]\npriority = 1\n")
    assert default_max_error_rate(settings) == 0.2
    assert get_source(settings, "a").max_error_rate == 0.2
    for text, message in (
        ("[sources.a]\npriority = 1\n[sources.b]\npriority = 1\n", "already the priority"),
        ("[sources.a]\npriority = -1\n", "priority must be"),
        ("[sources.a]\npriority = 1\ncolour = 2\n", "unknown key"),
        ("[ingest]\nmax_error_rate = 2\n", "from 0 to 1"),
        ("[ingest]\nspeed = 2\n", "unknown \\[ingest\\] setting"),
    ):
        write(tmp_path / "cumulus.toml", text)
        with pytest.raises(ConfigError, match=message):
            load_sources(settings)
