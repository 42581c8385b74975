"""The application layer: `Engine` holds one home's settings, its Spark session, its
schema and the compiled plan of its registered views, and runs every workflow of an
epoch (ingest, apply, close, validate) and of its views. The CLI (cumulus/commands), the
Spark jobs (cumulus.jobs), the pipeline and the warm engine call it; it sits above the
engine library, ingestion, reads and quality (tests/unit/test_layers.py). A process that
keeps one Engine keeps its JVM warm and compiles the views once.

    engine = Engine.open(home)
    engine.ingest("orders")                 # a source's landed files -> the open epoch
    engine.apply("orders")                  # its events -> maps.entries (fresh values)
    epoch, metrics = engine.close()         # repair, fold, tag epoch-N, ledger, stable
    outcome = engine.validate(epoch)        # GX suites; published | failed-validation

`run_step` runs a step as a command does: logging configured, an error printed as one
line with its exit status (errors.ExitCode), a traceback only when asked for."""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cumulus.config import Settings, check_home, load_settings, parse_duration
from cumulus.dbt.run import build
from cumulus.engine.stats import base_statistics
from cumulus.errors import (
    ConfigError,
    CumulusError,
    ExitCode,
    NoSuchTableError,
    NotFoundError,
    QualityError,
)
from cumulus.ingest.job import ingest_files
from cumulus.ingest.landing import late_entries
from cumulus.ingest.sources import add_source, get_source, remove_source
from cumulus.progress import command_progress
from cumulus.quality.validate import (
    HELD,
    Outcome,
    audit_epoch,
    epoch_to_validate,
    published_outcome,
    record_verdict,
    verdict_lines,
)
from cumulus.spark.session import spark_session
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.commit import table_metadata
from cumulus.store.files import committed_batches, epoch_counts
from cumulus.store.home import init_home, load_home_schema
from cumulus.store.ledger import DONE, FAILED, PUBLISHED, current_epoch, epoch_to_close, ledger_rows
from cumulus.store.maintenance import maintain
from cumulus.store.registry import live, registry
from cumulus.store.tables import Home, attach_catalog, tables_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cumulus.engine.apply import ApplyRecord
    from cumulus.engine.evaluate import BatchPlan
    from cumulus.engine.views import Dropped
    from cumulus.ingest.report import IngestReport
    from cumulus.ingest.sources import Source
    from cumulus.schema import Schema
    from cumulus.sql.estimate import Statistics
    from cumulus.sql.views import Compilation

log = logging.getLogger("cumulus.engine")


@dataclass(frozen=True)
class Applied:
    """What an apply step did: its record (None when nothing was applied) and a line saying so."""

    epoch: int
    record: ApplyRecord | None
    summary: str


class Engine:
    """One home's engine: settings, Spark session, schema, the registered views' plan."""

    _warm: ClassVar[dict[Path, Engine]] = {}  # per home: the engine `open` returns in this process

    def __init__(self, settings: Settings, spark: SparkSession | None = None, app_name: str = "cumulus") -> None:
        self.settings = settings
        self._spark = spark
        self._app_name = app_name
        self._schema: Schema | None = None
        self._compiled: tuple[int | None, Compilation, BatchPlan] | None = None  # (registry snapshot, ...)

    @classmethod
    def open(cls, home: str | Path | None = None, app_name: str = "cumulus") -> Engine:
        """The home's engine: the warm one if this process keeps one (keep_warm), else new."""
        settings = load_settings(home)
        check_home(settings)
        return cls._warm.get(settings.home) or cls(settings, app_name=app_name)

    def keep_warm(self) -> Engine:
        """Make `Engine.open` of this home return this engine in this process, so every step
        run here shares its Spark session and its compiled plan (the warm engine)."""
        type(self)._warm[self.settings.home] = self
        return self

    @property
    def spark(self) -> SparkSession:
        """The Spark session (started on first use), with the home's catalog attached."""
        if self._spark is None:
            self._spark = spark_session(self.settings, app_name=self._app_name)

        attach_catalog(Home(self._spark, self.settings))
        return self._spark

    @property
    def home(self) -> Home:
        """The home in this engine's Spark session: what the store and engine functions take."""
        return Home(self.spark, self.settings)

    @property
    def schema(self) -> Schema:
        if self._schema is None:
            self._schema = load_home_schema(self.settings)
        return self._schema

    def plan(self) -> BatchPlan:
        """The batch plan of every registered view, compiled once per registry state."""
        return self._compile()[1]

    def _compile(self) -> tuple[Compilation, BatchPlan]:
        """Compiled again only when the registry table has a new snapshot (a view added)."""
        from py4j.protocol import Py4JJavaError

        from cumulus.engine.registry import batch_plan, compile_registered

        try:
            state = table_metadata(self.spark, tables_of(self.settings).registry).get("current-snapshot-id")
        except (Py4JJavaError, NoSuchTableError):  # no view was ever added: the table does not exist
            state = None
        if self._compiled is None or state is None or self._compiled[0] != state:
            rows = registry(self.spark, self.settings)
            if not live(rows):
                raise NotFoundError(f"no view is registered in {self.settings.home} (cumulus view add NAME VIEW.sql)")
            compilation = compile_registered(self.schema, rows, self.settings.sql_dialect)
            self._compiled = (state, compilation, batch_plan(compilation))
        return self._compiled[1], self._compiled[2]

    def statistics(self, relations: dict[str, list[str]]) -> Statistics:
        """The statistics of `relations` (name -> columns) in base.* at the latest closed
        epoch (a Spark job per relation), for the compiler's cost estimates."""
        from cumulus.engine.views import latest_closed_epoch

        epoch = latest_closed_epoch(self.spark, self.settings)
        if epoch is None:
            raise ConfigError(f"{self.settings.home} has no closed epoch yet: no statistics (give --stats FILE)")
        return base_statistics(self.home, relations, epoch)

    # ------------------------------------------------------------------ the steps

    def ingest(self, source: str, paths: list[str] | None = None, fmt: str | None = None,
               relation: str | None = None) -> IngestReport:
        """Ingest a source's files (default: its landing folder) into the open epoch."""
        return ingest_files(self.home, source, paths, fmt, relation)

    def apply(self, source: str, epoch: int | None = None, wait: float = 0.0) -> Applied:
        """Apply the source's events of `epoch` (default: the open one) not applied yet,
        unless the epoch's close will rebuild the maps instead (cumulus/engine/recompute.py).
        While an earlier epoch is sealed but not closed, wait up to `wait` seconds for its
        close, then refuse (EpochOrderError: NOT_YET)."""
        from cumulus.engine.apply import apply_source
        from cumulus.engine.recompute import defer_to_close, program_changed

        priority = get_source(self.settings, source).priority
        plan = self.plan()
        epoch = epoch or current_epoch(self.spark, self.settings)
        deferred = defer_to_close(self.settings, program_changed(self.spark, self.settings, plan.checked.program))
        if deferred:
            log.info("epoch %d source %s: not applied: %s", epoch, source, deferred)
            return Applied(epoch, None, f"left to the close: {deferred}")
        record = apply_source(self.home, plan, epoch, priority, wait=wait)
        return Applied(epoch, record, record.headline() if record else "nothing to apply")

    def epoch_to_close(self) -> tuple[int, str]:
        """The epoch a close without one takes, and why (read with PyIceberg, no JVM)."""
        return epoch_to_close(pyiceberg_catalog(self.settings), self.settings)

    def close(self, epoch: int | None = None, progress: Callable[[str], None] | None = None,
              rebuild_maps: bool = False) -> tuple[int, dict[str, Any]]:
        """Close `epoch` (default: an interrupted close's, else the open one, said through
        `progress`); (epoch, the metrics written to the ledger). `rebuild_maps`: every map
        rebuilt from base.* at the close (close_epoch)."""
        from cumulus.engine.close import close_epoch

        plan = self.plan()
        if epoch is None:
            epoch, why = self.epoch_to_close()
            (progress or log.info)(f"closing epoch {epoch} ({why})")
        return epoch, close_epoch(self.home, plan, epoch, rebuild_maps, inputs=self._inputs)

    def _inputs(self, epoch: int) -> dict[str, Any]:
        """The input fields of a sealed epoch's `closed` ledger row: the counts of the file
        manifest (events accepted, rows rejected, files, batches; the close's metrics keep
        the events it applied) and the late files of the landing folders
        (cumulus.ingest.landing.late_entries: folders of the pipeline's layout that missed
        the epoch)."""
        counts = epoch_counts(self.spark, self.settings, epoch)
        late = late_entries(self.spark, self.settings, self.settings.pipeline, epoch)
        for entry in late:
            log.warning("epoch %d source %s: %s folder %s (%s)", epoch, entry["source"], entry["kind"],
                        entry["folder"], ", ".join(entry["files"]) or "no files")
        return {**{k: counts[k] for k in ("events", "rejected", "files", "batches")}, "late_files": late or None}

    def validate(self, epoch: int | None = None, expectations: str | Path | None = None, full: bool | None = None,
                 progress: Callable[[str], None] | None = None) -> Outcome | None:
        """Validate a closed epoch (default: the latest not validated yet), then publish it
        or fail it (write-audit-publish: the audit's verdict in the ledger, then what may
        be published moves `stable`; a passed epoch after one not published is held);
        None when no epoch waits. Spark starts only when there is something to validate.
        A crash is not a verdict on the data: QualityError."""
        from cumulus.engine.publish import holding

        say = progress or (lambda _line: None)
        catalog = pyiceberg_catalog(self.settings)
        if epoch is None:
            epoch = epoch_to_validate(catalog, self.settings)
            if epoch is None:
                say("nothing to validate: no closed epoch is waiting for validation (see cumulus epoch status)")
                return None
        done = published_outcome(catalog, self.settings, epoch, say)
        if done is not None:
            if done.state == HELD and holding(ledger_rows(catalog, self.settings), epoch) is None:
                # passed, but a crash came before its publication: publish it now
                done = replace(done, state=self._publish_passed(epoch))
                say(f"epoch {epoch}: {done.state}")
            return done
        say(f"epoch {epoch}: starting validation")
        try:
            summary = audit_epoch(self.home, epoch, expectations=expectations, progress=say, full=full)
        except CumulusError:
            raise
        except Exception as exc:
            log.exception("epoch %d: validation could not run", epoch)
            raise QualityError(f"epoch {epoch}: validation could not run ({type(exc).__name__}: {exc}); "
                               "the ledger is unchanged, retry") from exc
        passed = record_verdict(self.home, epoch, summary)
        state = self._publish_passed(epoch) if passed else FAILED
        log.info("epoch %d: validation %s -> %s; report %s", epoch, summary["outcome"], state, summary["report"])
        for line in verdict_lines(ledger_rows(self.spark, self.settings), self.settings, epoch, state, summary):
            say(line)
        return Outcome(epoch, passed, state, Path(summary["report"]), summary, validated=True)

    def _publish_passed(self, epoch: int) -> str:
        """Publish what may be after `epoch` passed: its state then, published or held."""
        from cumulus.engine.publish import publish_ready

        stable = publish_ready(self.home)
        return PUBLISHED if stable is not None and stable.epoch >= epoch else HELD

    def publish(self, epoch: int | None = None, accept_failed: bool = False, reason: str = "") -> int | None:
        """Publish what may be published (write-audit-publish: cumulus/engine/publish.py);
        with `accept_failed`, first the failed `epoch` as it is, `reason` in its ledger
        row. The stable epoch afterwards (None while no epoch is published)."""
        from cumulus.engine.publish import accept_failed as accept
        from cumulus.engine.publish import publish_ready

        if accept_failed:
            if epoch is None:
                raise CumulusError("--accept-failed takes the failed epoch: cumulus epoch publish N --accept-failed --reason TEXT")
            row = accept(self.home, epoch, reason)
        else:
            row = publish_ready(self.home)
        return row.epoch if row is not None else None

    def add_view(self, name: str, text: str, kind: str, force: bool = False) -> Compilation:
        """Register a view (SQL) or an M3 program, create its maps and back-fill them;
        `force`: even when its estimated state passes max_entries_per_base_row."""
        from cumulus.engine.views import add_view

        self._compiled = None
        return add_view(self.home, self.schema, name, text, kind, force)

    def drop_view(self, name: str) -> Dropped:
        """Drop a registered view: its catalog views, and the maps no other view needs."""
        from cumulus.engine.views import drop_view

        self._compiled = None
        return drop_view(self.home, self.schema, name)

    def maintain(self, retain_last: int | None = None, retain_for: str | dt.timedelta | None = None,
                 expire: bool = True, compact: bool | None = None, tables: list[str] | None = None) -> list:
        """Expire snapshots and compact every table, or `tables` (e.g. maps.entries); unset
        options take the home's [pipeline] retention (cumulus.store.maintenance.maintain)."""
        cfg = self.settings.pipeline
        return maintain(
            self.home,
            retain_last=cfg.retain_last if retain_last is None else retain_last,
            retain_for=cfg.retain_for if retain_for is None else parse_duration(retain_for, "retain_for"),
            expire=expire,
            compact=cfg.compact if compact is None else compact,
            target_file_size_mb=cfg.target_file_size_mb,
            min_input_files=cfg.min_input_files,
            tables=[f"{self.settings.catalog}.{t}" for t in tables] if tables else None,
        )

    def add_source(self, name: str, priority: int, landing: str | Path | None = None,
                   max_error_rate: float | None = None) -> Source:
        """Declare a source in cumulus.toml and create its landing folder."""
        return add_source(self.settings, name, priority, landing, max_error_rate)

    def remove_source(self, name: str) -> Source:
        """Take a source out of cumulus.toml (its landing folder and past events stay);
        refused while it has committed batches in an epoch not closed yet."""
        source = get_source(self.settings, name)
        catalog = pyiceberg_catalog(self.settings)
        unclosed = {r.epoch for r in ledger_rows(catalog, self.settings) if r.state not in DONE}
        pending = sorted({b.epoch for b in committed_batches(catalog, self.settings, source=source.name)
                          if b.epoch in unclosed})
        return remove_source(self.settings, name, pending)

    @classmethod
    def init(cls, home: str | Path | None, schema_file: str | Path) -> tuple[Engine, Any]:
        """Make `home` a Cumulus home: its schema, its Iceberg tables and epoch 1 (the same
        schema again changes nothing; another is refused); the engine and what init did."""
        engine = cls(load_settings(home), app_name="cumulus-init")
        return engine, init_home(engine.home, schema_file)

    def sql(self, statement: str) -> Any:
        """A Spark SQL statement of the user's on the home's catalog (the default catalog:
        `views_stable.v`, `results.v`, `base.orders` by name): its DataFrame (`cumulus sql`)."""
        return self.spark.sql(statement)

    def dbt_build(self, epoch: int | None = None, echo: Callable[[str], None] | None = None) -> tuple[int, list]:
        """`dbt build` of the project on the stable snapshot (or tag epoch-N), in one dbt
        process; (its exit status, the nodes it ran) (cumulus.dbt.run.build)."""
        return build(self.settings, epoch, echo=echo)


def exit_status(outcome: Outcome | None) -> int:
    """A validation's exit status: 0 passed (or nothing waited), 1 failed (a verdict on the data)."""
    return int(ExitCode.OK) if outcome is None or outcome.passed else int(ExitCode.CHECKS_FAILED)


def run_step(step: Callable[[], int | None], verbose: bool = False, debug: bool | None = None) -> int:
    """Run a step as a command: its progress on stderr (a live status line on a terminal,
    else INFO log lines: cumulus/progress.py); an error as one line and its exit
    status (errors.ExitCode: a Cumulus error's own, INFRASTRUCTURE for anything else);
    the traceback only with `debug` (--debug, or $CUMULUS_DEBUG=1); a closed pipe is
    success."""
    import os
    import traceback

    debug = os.environ.get("CUMULUS_DEBUG") == "1" if debug is None else debug
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines are noise
    try:
        with command_progress(logging.DEBUG if verbose or debug else logging.INFO, live=not (verbose or debug)):
            return int(step() or 0)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("cumulus: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every error ends as one line and a status
        if debug:
            traceback.print_exc()
        if isinstance(exc, CumulusError):
            print(f"cumulus: error: {exc}", file=sys.stderr)
            return int(exc.exit_code)
        hint = "" if debug else " (--debug shows the traceback)"
        print(f"cumulus: error: {one_line(exc)}{hint}", file=sys.stderr)
        return int(ExitCode.INFRASTRUCTURE)


def one_line(exc: BaseException) -> str:
    """An unexpected error (Spark, Iceberg, the file system) in one line: its type and the
    first line of its message that says something (a Java error's own, not py4j's
    "An error occurred while calling ...")."""
    lines = [line.strip(" :\t") for line in str(exc).splitlines() if line.strip(" :\t")]
    said = next((line for line in lines if not line.startswith(("An error occurred while calling", "at "))), "")
    return f"{type(exc).__name__}: {said[:400]}" if said else type(exc).__name__
