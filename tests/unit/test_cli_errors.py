"""Every command that needs a home, against a missing home, a folder that is not a home,
an empty (initialized) home and bad arguments: one line on stderr naming the problem, the
exit status of its kind (errors.ExitCode, README: Exit codes), never a traceback, and
nothing created by a read."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cumulus.app import one_line, run_step
from cumulus.cli import main
from cumulus.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "demo" / "tpch_schema.sql"
VIEW = REPO / "demo" / "views" / "pricing_summary.sql"

# Every subcommand that works on a home, with arguments that parse.
HOME_COMMANDS = [
    ["sql", "SELECT 1"], ["sql-server"],
    ["view", "add", "v", str(VIEW)], ["view", "list"], ["view", "show", "v"], ["view", "sql", "v"],
    ["view", "drop", "v"], ["read", "v"], ["apply", "--source", "s"],
    ["source", "add", "s", "--priority", "1"], ["source", "list"], ["source", "remove", "s"],
    ["ingest", "--source", "s", str(REPO / "demo")],
    ["epoch", "status"], ["epoch", "show", "1"], ["epoch", "close"], ["epoch", "publish"],
    ["quarantine", "list"], ["quarantine", "show", "1"],
    ["validate"], ["quality", "report"], ["maintenance"], ["dbt", "ls"],
    ["engine", "serve"], ["engine", "status"], ["engine", "stop"],
]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not re.match(r"\d{4}-\d\d-\d\d .* (INFO|DEBUG) ", line)]
    assert len(lines) == 1 and lines[0].startswith("cumulus: error: "), err
    assert "Traceback" not in err
    return lines[0]


def _subcommands(parser) -> dict:
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return subs[0].choices if subs else {}


def test_the_command_list_covers_every_home_command() -> None:
    from cumulus.cli import build_parser

    def leaves(parser, prefix=()):
        subs = _subcommands(parser)
        return [leaf for name, p in subs.items() for leaf in leaves(p, (*prefix, name))] if subs else [prefix]

    def leaf(argv):
        parser, path = build_parser(), ()
        for word in argv:
            if word not in _subcommands(parser):
                break
            parser, path = _subcommands(parser)[word], (*path, word)
        return path

    without_home = {("m3", "check"), ("m3", "fmt"), ("compile",), ("explain",), ("interpret",), ("init",), ("generate", "tpch")}
    assert set(leaves(build_parser())) - without_home == {leaf(argv) for argv in HOME_COMMANDS}


@pytest.mark.parametrize("argv", HOME_COMMANDS, ids=" ".join)
def test_a_missing_home_is_one_line_exit_3_and_nothing_is_created(capsys, tmp_path, argv) -> None:
    missing, plain = tmp_path / "nowhere", tmp_path / "plain"
    plain.mkdir()
    for home in (missing, plain):
        code, out, err = run(capsys, "--home", str(home), *argv)
        line = _one_error_line(err)
        assert code == ExitCode.NOT_A_HOME and out == "", (code, out, err)
        assert f"{home} is not a Cumulus home" in line and "init --schema" in line
    assert not missing.exists() and list(plain.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["epoch", "show", "three"],  # not a number
    ["epoch", "close", "--epoch"],  # a value missing
    ["view", "add", "v"],  # an argument missing
    ["view", "list", "--format", "xml"],  # not a format
    ["nonsense"],  # not a command
    ["dbt", "profile", "--nonsense"],  # dbt's own subcommands parse their arguments too
])
def test_bad_arguments_exit_2_with_the_usage(capsys, tmp_path, argv) -> None:
    code, out, err = run(capsys, "--home", str(tmp_path / "h"), *argv)
    assert code == ExitCode.REFUSED and "usage: cumulus" in err and "error:" in err and "Traceback" not in err
    assert not (tmp_path / "h").exists()


def test_help_prints_help_and_changes_nothing(capsys, tmp_path) -> None:
    for argv in (["dbt", "profile", "--help"], ["dbt", "generate", "--help"], ["epoch", "close", "--help"]):
        code, out, err = run(capsys, "--home", str(tmp_path / "h"), *argv)
        assert code == 0 and out.startswith("usage: cumulus") and err == "", (argv, out, err)
    code, out, _ = run(capsys, "--version")
    assert code == 0 and re.fullmatch(r"cumulus \d+\.\d+\.\d+\n", out)
    assert not (tmp_path / "h").exists()


def test_an_unexpected_error_is_one_line_with_the_infrastructure_status(capsys) -> None:
    def broken():
        raise RuntimeError("An error occurred while calling o42.sql.\n: org.apache.iceberg.exceptions."
                           "CommitFailedException: metadata moved\n\tat org.apache.iceberg.Foo(Foo.java:1)")

    assert run_step(broken) == ExitCode.INFRASTRUCTURE
    line = _one_error_line(capsys.readouterr().err)
    assert line == ("cumulus: error: RuntimeError: org.apache.iceberg.exceptions.CommitFailedException: "
                    "metadata moved (--debug shows the traceback)")
    assert run_step(broken, debug=True) == ExitCode.INFRASTRUCTURE
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.rstrip().endswith("metadata moved")
    assert one_line(OSError(28, "No space left on device")) == "OSError: [Errno 28] No space left on device"


def test_the_exit_codes_are_documented_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    for code in ExitCode:
        assert re.search(rf"^\| {code.value} \| `{code.name}` \|", readme, re.M), code


@pytest.fixture(scope="module")
def empty_home(tmp_path_factory) -> Path:
    """An initialized home with no view, source or closed epoch (init starts one JVM)."""
    home = tmp_path_factory.mktemp("empty") / "home"
    done = subprocess.run([sys.executable, "-m", "cumulus.cli", "--home", str(home), "init", "--schema", str(SCHEMA)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return home


@pytest.mark.spark  # init starts a JVM (in a subprocess)
@pytest.mark.parametrize(("argv", "code", "says"), [
    (["view", "list"], ExitCode.OK, None),
    (["source", "list"], ExitCode.OK, None),
    (["epoch", "status"], ExitCode.OK, None),
    (["quarantine", "list"], ExitCode.OK, None),
    (["view", "show", "v"], ExitCode.NOT_FOUND, "no view is registered"),
    (["view", "sql", "v"], ExitCode.NOT_FOUND, "no view is registered"),
    (["view", "drop", "v"], ExitCode.NOT_FOUND, "no view named v is registered (views: none)"),
    (["read", "v"], ExitCode.NOT_FOUND, "no view is registered"),
    (["apply", "--source", "s"], ExitCode.NOT_FOUND, "unknown source 's'"),
    (["source", "remove", "s"], ExitCode.NOT_FOUND, "unknown source 's'"),
    (["epoch", "show", "7"], ExitCode.NOT_FOUND, "epoch 7 is not in the ledger"),
    (["quarantine", "show", "1"], ExitCode.NOT_FOUND, "no quarantine row 1"),
    (["quality", "report"], ExitCode.NOT_FOUND, "no epoch has been validated yet"),
    (["engine", "status"], ExitCode.INFRASTRUCTURE, "no warm engine runs"),
])
def test_an_empty_home_answers_or_names_what_it_lacks(capsys, empty_home, argv, code, says) -> None:
    before = sorted(p.relative_to(empty_home) for p in empty_home.rglob("*") if "catalog.db" not in p.name)
    got, out, err = run(capsys, "--home", str(empty_home), *argv)
    assert got == code, (got, out, err)
    if says:
        assert says in _one_error_line(err)
    else:
        assert "error" not in err and out
    after = sorted(p.relative_to(empty_home) for p in empty_home.rglob("*") if "catalog.db" not in p.name)
    assert after == before
