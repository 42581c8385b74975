"""Progress on a terminal: the engine's INFO lines become one live status line (a spinner
with the latest step), warnings stay above it, stdout is never touched; off a terminal,
in CI or with --verbose, plain log lines."""

from __future__ import annotations

import io
import logging
import re

from rich.console import Console

from cumulus.app import run_step
from cumulus.progress import command_progress, interactive

log = logging.getLogger("cumulus.close")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_steps_update_one_status_line_and_warnings_stay() -> None:
    console = Console(file=Tty(), force_terminal=True, width=120)
    with command_progress(console=console):
        log.info("epoch 3: fold base.lineitem")
        log.warning("epoch 3 source catalog: late folder epoch-3")
        log.debug("not shown")
    out = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", console.file.getvalue())  # the terminal's control codes
    assert "epoch 3: fold base.lineitem" in out  # drawn in the status line
    assert "warning: epoch 3 source catalog: late folder epoch-3" in out
    assert "not shown" not in out
    assert logging.getLogger().handlers == [] or all(
        not h.__class__.__name__ == "_StatusHandler" for h in logging.getLogger().handlers)


def test_progress_is_drawn_only_on_a_terminal_outside_ci(monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CUMULUS_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert interactive(Tty()) and not interactive(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not interactive(Tty())
    monkeypatch.delenv("CI")
    monkeypatch.setenv("CUMULUS_PROGRESS", "0")
    assert not interactive(Tty())


def test_a_command_output_stays_apart_from_its_progress(capsys, caplog) -> None:
    def step():
        log.info("epoch 1: tag 10 tables")
        print("epoch,state\n1,closed")
        return 0

    with caplog.at_level(logging.INFO):
        assert run_step(step) == 0
    out, _ = capsys.readouterr()
    assert out == "epoch,state\n1,closed\n" and "epoch 1: tag 10 tables" in caplog.text  # not a terminal: log lines


def test_on_a_terminal_a_piped_stdout_still_gets_the_output(capsys) -> None:
    """`cumulus read V --format csv | ...` in a terminal: the rows go down the pipe, not
    to the screen above the status line (rich's Live redirects stdout by default)."""
    console = Console(file=Tty(), force_terminal=True, width=120)
    with command_progress(console=console):
        log.info("epoch 1: read the view")
        print("nation,revenue\nPERU,1.5")
    assert capsys.readouterr().out == "nation,revenue\nPERU,1.5\n"
    assert "PERU" not in console.file.getvalue()
