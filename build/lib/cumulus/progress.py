"""Progress of a command on a terminal. Every step of the engine logs what it starts and
finishes (which epoch, source, table); on a terminal those lines become one live status
line, a spinner with the latest step and the seconds so far, while warnings and errors
print above it and stay. Not on a terminal, in CI (`$CI`), with `--verbose` or
`$CUMULUS_PROGRESS=0`, the log lines are printed as they are. Progress goes to stderr
only: what a command prints on stdout (tables, CSV, JSON) is never mixed with it."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def interactive(stream=None) -> bool:
    """True when progress should be drawn: stderr is a terminal, not CI, not turned off."""
    stream = stream or sys.stderr
    if os.environ.get("CI") or os.environ.get("CUMULUS_PROGRESS") == "0" or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


class _StatusHandler(logging.Handler):
    """INFO lines update the status line; WARNING and above print above it."""

    def __init__(self, console, spinner, started: float):
        super().__init__(logging.INFO)
        self.console, self.spinner, self.started = console, spinner, started

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().splitlines()[0] if record.getMessage() else ""
            if record.levelno >= logging.WARNING:
                style = "red" if record.levelno >= logging.ERROR else "yellow"
                self.console.print(f"[{style}]{record.levelname.lower()}[/]: {message}", markup=True, highlight=False)
            else:
                seconds = time.monotonic() - self.started
                self.spinner.update(text=f"{_escape(message)}  [dim]{seconds:.0f} s[/]")
        except Exception:  # noqa: BLE001 - a progress line must never break the command
            self.handleError(record)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text[:200])


@contextmanager
def command_progress(level: int = logging.INFO, live: bool = True, console=None) -> Iterator[None]:
    """Logging for a command's run: the live status line when `live` and on a terminal
    (or on `console`, for tests), else plain log lines on stderr."""
    if console is None and not (live and interactive()):
        logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
        yield
        return
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

    console = console or Console(stderr=True)
    root = logging.getLogger()
    handlers, old_level = list(root.handlers), root.level
    spinner = Spinner("dots", "working", style="status.spinner")
    # The command's stdout goes where it goes (a pipe, a file): rich's Live would send it to
    # the terminal above the status line, so it only does when stdout is that terminal too.
    stdout_on_screen = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
    with Live(spinner, console=console, transient=True, refresh_per_second=12.5,
              redirect_stdout=stdout_on_screen, redirect_stderr=False):
        root.handlers[:] = [_StatusHandler(console, spinner, time.monotonic())]
        root.setLevel(level)
        try:
            yield
        finally:
            root.handlers[:] = handlers
            root.setLevel(old_level)
