"""The data-quality step of a closed epoch (the audit of write-audit-publish).
`audit_epoch` runs the suites of expectations/ over the maps, base relations and events
at the tag `epoch-N` and the oracle over every view as the run `epoch-N` of the home's
GX context (gxrun.py), whose checkpoints add the epoch's results to the one Data Docs
site `<home>/reports/data_docs/`, and writes summary.json and the forwarding index.html
to `<home>/reports/epoch-N/`. `record_verdict` records the outcome in the ledger:
"failed" moves the row to failed-validation (`stable` stays where it was); "passed"
leaves it `closed` with validation "passed", for the application layer
(cumulus/app.py, Engine.validate) to publish (cumulus/engine/publish.py) unless an
earlier epoch is not published yet: then it is held, and published as soon as that one
is. Idempotent: a published epoch is only reported again (`published_outcome`), a held
one too; a failed one is validated again (after a repair it may pass), its new results
replacing the earlier ones."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cumulus.config import Settings
from cumulus.errors import NoSuchEpochError, QualityError
from cumulus.faults import fault_point
from cumulus.quality import frames
from cumulus.quality.facts import map_facts
from cumulus.quality.gxrun import GxRun
from cumulus.quality.oracle import (
    Tolerance,
    ViewComparison,
    compare_view,
    recompute,
    register_expanded_base,
)
from cumulus.quality.spec import SuiteSpec, load_suites
from cumulus.quality.summary import (
    FAILED,
    PASSED,
    failed_checks,
    ledger_detail,
    read_summary,
    report_dir,
    report_page,
    summary_from_ledger,
    summary_path,
    write_epoch_page,
    write_summary,
)
from cumulus.read import At, Reader
from cumulus.store.catalog import pyiceberg_catalog
from cumulus.store.files import committed_batches
from cumulus.store.home import load_home_schema
from cumulus.store.ledger import CLOSED, PUBLISHED, ledger_row, ledger_rows, transition
from cumulus.store.ledger import FAILED as FAILED_STATE
from cumulus.store.registry import live, registry
from cumulus.store.tables import Home, pyiceberg_name

if TYPE_CHECKING:

    from cumulus.quality.facts import MapFacts
    from cumulus.quality.gxrun import GxRun, SuiteOutcome
    from cumulus.schema import Relation, Schema
    from cumulus.sql.views import Compilation

log = logging.getLogger("cumulus.quality")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Outcome:
    epoch: int
    passed: bool
    state: str  # the ledger state afterwards
    report: Path  # the epoch's page in the Data Docs site (summary.report_page)
    summary: dict[str, Any]
    validated: bool  # False: the epoch was already published and is only reported


HELD = "held"  # an Outcome's state: passed, waiting for an earlier epoch to be published


def epoch_to_validate(reader, settings: Settings) -> int | None:
    """The oldest closed epoch that has not been validated yet (None when there is none)."""
    closed = [r.epoch for r in ledger_rows(reader, settings) if r.state == CLOSED and not r.validation]
    return min(closed) if closed else None


def held_text(rows, epoch: int, settings: Settings) -> str:
    """Why a passed epoch is not published yet, and what publishes it."""
    from cumulus.engine.publish import holding

    blocker = holding(rows, epoch)
    if blocker is None:
        return f"epoch {epoch} passed validation; publishing it"
    if blocker.state == FAILED_STATE:
        todo = (f"cumulus --home {settings.home} epoch publish {blocker.epoch} --accept-failed --reason TEXT, "
                f"or repair it and validate it again")
    else:
        todo = f"validate it: cumulus --home {settings.home} validate --epoch {blocker.epoch}"
    return (f"epoch {epoch} passed validation and is held: epoch {blocker.epoch} is {blocker.state}"
            f"{f' (validation {blocker.validation})' if blocker.validation else ''}, and epochs are published "
            f"in order ({todo})")


def published_outcome(reader, settings: Settings, epoch: int, say: Progress) -> Outcome | None:
    """The stored outcome of an epoch published already; None for a closed (or failed)
    epoch, which validation runs on; QualityError for one that is not in the ledger or
    not closed. `reader`: a SparkSession or a PyIceberg catalog (no JVM)."""
    row = ledger_row(reader, settings, epoch)
    if row is None:
        raise NoSuchEpochError(f"epoch {epoch} is not in the ledger (see cumulus epoch status)")
    if row.state == PUBLISHED:
        summary = read_summary(settings, epoch) or summary_from_ledger(settings, epoch, row)
        say(f"epoch {epoch}: already published (validation {row.validation}); nothing to do")
        say(f"report: {summary['report']}")
        log.info("epoch %d: already published; reporting the stored validation", epoch)
        return Outcome(epoch, True, PUBLISHED, Path(summary["report"]), summary, validated=False)
    if row.state == CLOSED and row.validation:  # passed (or accepted), held by an earlier epoch
        summary = read_summary(settings, epoch) or summary_from_ledger(settings, epoch, row)
        say(held_text(ledger_rows(reader, settings), epoch, settings))
        say(f"report: {summary['report']}")
        return Outcome(epoch, True, HELD, Path(summary["report"]), summary, validated=False)
    if row.state not in (CLOSED, FAILED_STATE):
        raise QualityError(
            f"epoch {epoch} is {row.state}; only a closed epoch can be validated "
            f"(close it first: cumulus --home {settings.home} epoch close)"
        )
    return None


def audit_epoch(
    home: Home,
    epoch: int,
    expectations: str | Path | None = None,
    progress: Progress | None = None,
    full: bool | None = None,
) -> dict[str, Any]:
    """Run a closed epoch's checks and write its report; its summary (`outcome` passed or
    failed). `full` (default: epoch 1 and every `full_validation_every` epochs after it)
    checks every map entry and base tuple and runs the oracle, which recomputes every
    view; otherwise the checks cover what the epoch touched: the entries it wrote, the
    tuples its events changed, its events. Writes no ledger row."""
    say = progress or (lambda _line: None)
    specs = load_suites(expectations)
    started = time.perf_counter()
    log.info("epoch %d: validating", epoch)
    if full is None:
        full = is_full_epoch(home.settings, epoch)
    summary = _run(home, epoch, specs, say, full)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    write_summary(home.settings, summary)
    write_epoch_page(home.settings, epoch, Path(summary["report"]))
    return summary


def record_verdict(home: Home, epoch: int, summary: dict[str, Any]) -> bool:
    """The audit's verdict in the ledger: a passed epoch stays `closed`, with its
    validation (for the publish); a failed one becomes failed-validation. Whether it passed."""
    passed = summary["outcome"] == PASSED
    transition(home, epoch, CLOSED if passed else FAILED_STATE, validation=summary["outcome"],
               validation_detail=ledger_detail(summary))
    if passed:
        fault_point("validate.after-ledger")
    return passed


def verdict_lines(rows, settings: Settings, epoch: int, state: str, summary: dict[str, Any]) -> list[str]:
    """What a validation says when it ends: its outcome and state, why a passed epoch is
    held, the failed checks, where the reports are."""
    lines = [f"epoch {epoch}: validation {summary['outcome']} -> {state}"]
    if state == HELD:
        lines.append(held_text(rows, epoch, settings))
    if summary["outcome"] != PASSED:
        lines.append(f"epoch {epoch}: failed checks: {', '.join(summary['failed_checks'])}")
    return [*lines, f"data docs (every epoch): {summary['data_docs']}", f"report: {summary['report']}"]


@dataclass
class Scope:
    """What one epoch's validation looks at."""

    schema: Schema
    compilation: Compilation | None
    views: list[str]  # registered views due at the epoch
    skipped_views: list[str]  # registered after it: no tag epoch-N yet
    maps: list[MapFacts]  # the due views' maps that carry the tag
    relations: list[Relation]  # the relations whose base table carries the tag
    tables: dict[str, str]  # every due map and base table -> "maps" | "base"
    tags: dict[str, int | None]  # table -> the snapshot its tag epoch-N points at
    skipped_maps: list[str]


def _scope(home: Home, epoch: int) -> Scope:
    from cumulus.engine.registry import compile_registered

    schema = load_home_schema(home.settings)
    rows = registry(home.spark, home.settings)
    views = live(rows)
    compilation = compile_registered(schema, rows, home.settings.sql_dialect) if views else None
    due = [v.name for v in views if v.added_epoch <= epoch]  # a view added later is tagged from then on
    facts = map_facts(compilation) if compilation else {}
    sharing = compilation.sharing() if compilation else {}
    due_maps = [m for m in facts if set(sharing.get(m, ())) & set(due)]
    tables = {home.tables.maps: "maps"} if due_maps else {}
    tables.update({home.tables.base(r.name): "base" for r in schema.relations})
    catalog = pyiceberg_catalog(home.settings)
    tags = {t: _tag_snapshot(catalog, t, epoch) for t in tables}
    return Scope(
        schema=schema,
        compilation=compilation,
        views=due,
        skipped_views=[v.name for v in views if v.added_epoch > epoch],
        maps=[facts[m] for m in due_maps if tags[home.tables.maps] is not None],
        relations=[r for r in schema.relations if tags[home.tables.base(r.name)] is not None],
        tables=tables,
        tags=tags,
        skipped_maps=[m for m in facts if m not in due_maps],
    )


def is_full_epoch(settings: Settings, epoch: int) -> bool:
    """Whether a validation of `epoch` checks everything by default (epoch 1, 1 + K, ...)."""
    return (epoch - 1) % settings.full_validation_every == 0


def _run(
    home: Home, epoch: int, specs: dict[str, SuiteSpec], say: Progress, full: bool
) -> dict:
    import pandas as pd

    scope = _scope(home, epoch)
    folder = report_dir(home.settings, epoch)
    if folder.exists():
        shutil.rmtree(folder)  # an earlier run's summary (or, before the one site, the epoch's own site)
    if full:
        say(
            f"epoch {epoch}: validating in full: every entry of {len(scope.maps)} maps, every tuple of "
            f"{len(scope.relations)} base relations, the epoch's events and {len(scope.views)} view(s) "
            f"recomputed, at tag epoch-{epoch}"
        )
    else:
        after = epoch + home.settings.full_validation_every - (epoch - 1) % home.settings.full_validation_every
        say(
            f"epoch {epoch}: validating what the epoch touched: the entries it wrote in {len(scope.maps)} maps, "
            f"the tuples it changed in {len(scope.relations)} base relations and its events, at tag epoch-{epoch} "
            f"(in full, with the oracle, at epoch {after} or with --full)"
        )
    say(f"epoch {epoch}: loading Great Expectations")
    run = GxRun(home.settings.home, run_name=f"epoch-{epoch}")
    suites: list[dict] = []

    recorded = ledger_row(home.spark, home.settings, epoch).snapshots or {}
    tag_rows = [
        {"table": t, "kind": kind, "tag_snapshot": _text(scope.tags[t]), "ledger_snapshot": _text(recorded.get(t))}
        for t, kind in scope.tables.items()
    ]
    outcome = run.validate(specs["tags"], pd.DataFrame(tag_rows, columns=list(specs["tags"].frame), dtype=object))
    suites.append(_suite_dict(outcome, specs["tags"], list(scope.tables)))
    _say_suite(say, epoch, outcome)

    relations = list(scope.schema.relations)
    # The epoch's events first: a touched check of a base relation without any is empty,
    # so it is left out (not a scan of the relation and its events for nothing).
    local = home.settings.validation_local_rows
    events = frames.for_gx(frames.events_frame(home, relations, epoch), local)
    try:
        changed = set(frames.column_values(events, "relation"))
        based = [r for r in scope.relations if full or r.name in changed]
        stacked = {
            "maps": (
                lambda: frames.for_gx(frames.maps_frame(home, scope.maps, epoch, touched=not full), local),
                [m.name for m in scope.maps], {},
            ),
            "base": (
                lambda: frames.for_gx(frames.base_frame(home, based, epoch, touched=not full), local),
                [r.name for r in based], {},
            ),
            "events": (
                lambda: events, [r.name for r in relations],
                {"committed_batches": [b.batch_id for b in committed_batches(home.spark, home.settings, epoch)]},
            ),
        }
        for name, (build, names, parameters) in stacked.items():
            say(f"epoch {epoch}: suite {name} over {len(names)} table(s)")
            frame = build()
            try:
                outcome = run.validate(specs[name], frame, parameters)
            finally:
                if frame is not events:
                    frames.release(frame)
            suites.append(_suite_dict(outcome, specs[name], names))
            _say_suite(say, epoch, outcome)
    finally:
        frames.release(events)

    views = _oracle(home, scope, epoch, specs["oracle"], run, suites, say) if full else []
    index = run.finish()
    failed = failed_checks(suites, views)
    return {
        "epoch": epoch,
        "outcome": PASSED if not failed else FAILED,
        "validated_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "report": report_page(suites),
        "data_docs": str(index),
        "summary": str(summary_path(home.settings, epoch)),
        "suites": suites,
        "views": views,
        "scope": "full" if full else "touched",
        "skipped": {"views": scope.skipped_views, "maps": scope.skipped_maps},
        "failed_checks": failed,
    }


def _oracle(home: Home, scope: Scope, epoch: int, spec: SuiteSpec, run: GxRun, suites: list[dict],
            say: Progress) -> list[dict]:
    """Compare every due view with its recomputation; validate the comparison frame. Only
    tagged relations are registered: a view over an untagged one fails its own check."""
    import pandas as pd

    tolerance = Tolerance(
        float(spec.meta.get("double_relative_tolerance", 1e-9)), float(spec.meta.get("double_absolute_tolerance", 1e-9))
    )
    comparisons: list[ViewComparison] = []
    temp_views = register_expanded_base(home, scope.relations, epoch) if scope.views else []
    try:
        reader = Reader(home.settings)
        for name in scope.views:
            plan = scope.compilation.views[name]
            try:
                engine = reader.read_view(name, At(epoch))
                recomputed = recompute(home.spark, plan, scope.schema, epoch)
                comparison = compare_view(plan, engine, recomputed, tolerance)
            except Exception as exc:  # a view that cannot be read or recomputed fails its check
                log.warning("epoch %d: oracle for view %s raised %s: %s", epoch, name, type(exc).__name__, exc)
                comparison = ViewComparison(name, plan.column_names, error=f"{type(exc).__name__}: {exc}"[:500])
                comparison.rows.append({"view": name, "group": "{}", "engine": None, "recomputed": None,
                                        "difference": f"error: {comparison.error}"})
            comparisons.append(comparison)
            state = "equal" if comparison.equal else f"DIFFERS ({len(comparison.differences)} rows)"
            say(f"epoch {epoch}: oracle {name}: {comparison.engine_rows} rows, recomputed {comparison.recomputed_rows}: {state}")
            log.info("epoch %d: oracle view %s %s", epoch, name, state)
    finally:
        for view in temp_views:
            home.spark.catalog.dropTempView(view)
    rows = [r for c in comparisons for r in c.rows]
    outcome = run.validate(spec, pd.DataFrame(rows, columns=list(spec.frame), dtype=object))
    suites.append(_suite_dict(outcome, spec, scope.views))
    _say_suite(say, epoch, outcome)
    return [
        {
            "view": c.view,
            "success": c.equal,
            "engine_rows": c.engine_rows,
            "recomputed_rows": c.recomputed_rows,
            "differences": c.differences[:5],
            "error": c.error,
        }
        for c in comparisons
    ]


def _tag_snapshot(catalog, table: str, epoch: int) -> int | None:
    """The snapshot id the tag epoch-N of `table` points at (None: no tag, or no table)."""
    try:
        snapshot = catalog.load_table(pyiceberg_name(table)).snapshot_by_name(f"epoch-{epoch}")
    except Exception as exc:  # a missing table has no tag either
        log.warning("epoch %d: cannot load %s: %s", epoch, table, exc)
        return None
    return None if snapshot is None else snapshot.snapshot_id


def _text(value) -> str | None:
    """Snapshot ids as text: pandas would turn a column of ints and NULLs into floats."""
    return None if value is None else str(value)


def _suite_dict(outcome: SuiteOutcome, spec: SuiteSpec, tables: list[str]) -> dict:
    from dataclasses import asdict

    return {
        "suite": outcome.name,
        "success": outcome.success,
        "rows": outcome.rows,
        "spec": spec.path.name,
        "sha256": spec.sha256,
        "tables": tables,
        "page": str(outcome.page) if outcome.page else None,
        "checks": [{"check": c.pop("name"), **c} for c in (asdict(x) for x in outcome.checks)],
    }


def _say_suite(say: Progress, epoch: int, outcome: SuiteOutcome) -> None:
    passed = sum(c.success for c in outcome.checks)
    failed = [c.name for c in outcome.checks if not c.success]
    say(
        f"epoch {epoch}: suite {outcome.name}: {passed}/{len(outcome.checks)} checks passed over {outcome.rows} rows"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
