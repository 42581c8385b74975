"""The one error hierarchy of Cumulus. Every message a user sees says what went wrong,
where (file, line, column, relation, epoch) and, where it helps, what to do."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


@dataclass(frozen=True)
class Position:
    """A place in a source text: 1-based line and column, plus the text's name."""

    line: int
    col: int
    source: str = ""

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}line {self.line}, col {self.col}"


def mark(text: str, pos: Position | None, width: int = 1) -> str:
    """The line of `text` at `pos` with a caret marker under the offending span."""
    if pos is None or not text:
        return ""
    lines = text.splitlines() + [""]  # an error at the end of input marks the empty line after it
    if not 1 <= pos.line <= len(lines):
        return ""
    line = lines[pos.line - 1]
    return f"\n  {line}\n  {' ' * (pos.col - 1)}{'^' * max(1, width)}"


class ExitCode(IntEnum):
    """The exit status of every `cumulus` command and spark job (README: Exit codes). The
    DAGs retry INFRASTRUCTURE and NOT_YET; the others are verdicts a retry cannot change."""

    OK = 0
    CHECKS_FAILED = 1  # validate: the epoch's data failed its checks
    REFUSED = 2  # bad arguments or input: the request cannot succeed as given
    NOT_A_HOME = 3  # --home is not an initialized Cumulus home
    NOT_FOUND = 4  # no such view, map, epoch, source or table
    INFRASTRUCTURE = 5  # Spark, Iceberg, the catalog, the file system, the warm engine
    NOT_YET = 6  # an earlier epoch is not closed yet: the step runs once it is

    @classmethod
    def final(cls) -> tuple[int, ...]:
        """The statuses a retry cannot change (the DAGs fail the task at once)."""
        return tuple(int(c) for c in cls if c not in (cls.OK, cls.INFRASTRUCTURE, cls.NOT_YET))


class CumulusError(Exception):
    """Base of every error Cumulus raises on purpose."""

    exit_code = ExitCode.REFUSED


class NotFoundError(CumulusError):
    """A view, map, epoch, source or table that does not exist (names what does)."""

    exit_code = ExitCode.NOT_FOUND


class PositionedError(CumulusError):
    """An error at a place in a text: "what. line N, col M" and the text marked."""

    def __init__(self, what: str, pos: Position | None = None, text: str = "", width: int = 1):
        self.what = what
        self.pos = pos
        where = f". {pos}" if pos else ""
        super().__init__(f"{what}{where}{mark(text, pos, width)}")


class SchemaError(PositionedError):
    """The DDL could not be read, or names an unknown relation, column or type."""


class M3SyntaxError(PositionedError):
    """An M3 program text does not follow the grammar."""


class M3ValidationError(PositionedError):
    """An M3 program parses but breaks a typing or restricted-M3 rule."""


class UnsupportedSQLError(PositionedError):
    """A view uses SQL outside the supported fragment; the message names the construct."""


class SQLBindError(PositionedError):
    """A view names a relation or column the schema does not have, or mixes types."""


class InterpreterError(CumulusError):
    """The reference interpreter cannot execute an event (unknown relation, bad arity)."""


class EventFormatError(CumulusError):
    """An event file cannot be read: says which file and line."""


class ConfigError(CumulusError):
    """The Cumulus home or its configuration is missing or inconsistent."""


class NotAHomeError(ConfigError):
    """--home (or $CUMULUS_HOME) is not an initialized Cumulus home."""

    exit_code = ExitCode.NOT_A_HOME


class NoSuchSourceError(ConfigError, NotFoundError):
    """A source the home does not declare."""


class StoreError(CumulusError):
    """The Iceberg tables of a home are missing or inconsistent: not initialized, another
    schema, a lock not obtained in time, a ledger transition that is not allowed."""


class NoSuchTableError(StoreError, NotFoundError):
    """A table the catalog does not have (a home not initialized, a map table not made yet)."""


class NoSuchEpochError(StoreError, NotFoundError):
    """An epoch the ledger does not have."""


class EpochOrderError(StoreError):
    """Epochs close in order: an epoch cannot be sealed or closed (nor run by the pipeline)
    while an earlier one is still open or sealed but not closed. Names the earlier epoch."""

    exit_code = ExitCode.NOT_YET


class PublishError(StoreError):
    """An epoch cannot be published as asked (accepting one that did not fail, no reason)."""


class IngestError(CumulusError):
    """Ingestion refused or failed a batch: no open epoch, unreadable input, or a source
    whose error rate passed its threshold. Says which source, epoch and file."""

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class ViewSQLError(CumulusError):
    """A view or version cannot be turned into SQL (unknown view, bad tag)."""


class QualityError(CumulusError):
    """Validation cannot run: an epoch that is not closed, a broken suite file, a home
    without a report. Says which epoch or file, and what to do."""


class ViewError(CumulusError):
    """A view cannot be registered (name taken, SQL refused) or is unknown."""


class EngineError(CumulusError):
    """The Spark engine cannot run a program or a batch as asked."""


class EngineUnavailable(EngineError):
    """The home's warm engine (cumulus engine serve) is not running or stopped answering."""

    exit_code = ExitCode.INFRASTRUCTURE


class ReadError(NotFoundError):
    """A read names an unknown map, view or epoch."""


class SQLServerError(CumulusError):
    """The Thrift server could not start, or stopped on its own."""


class GenerateError(CumulusError):
    """The generated files cannot be written or differ from the committed ones."""


class SQLQueryError(CumulusError):
    """Spark refused or failed a statement given to `cumulus sql`."""
