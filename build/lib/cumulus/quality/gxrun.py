"""Great Expectations (GX Core 1.x) for one validation run (run name `epoch-N`), in the
home's file-backed Data Context `<home>/gx/` (created by the first validation): a Spark
and a pandas Data Source with one dataframe Data Asset per suite, and per suite and frame
kind a stored Expectation Suite, Validation Definition and Checkpoint, each added or
updated in place (a re-validation or a retry after a crash finds them). Every Checkpoint
carries GX's UpdateDataDocsAction: its run stores the validation result in the context's
validation results store and adds the result's page to the home's one Data Docs site,
`<home>/reports/data_docs/`, whose index lists every stored result, so every epoch's
validation as history. The suites come from expectations/*.yml (spec.py).

GX is imported only here, and only when validation runs: the import alone takes 10-20 s.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cumulus.errors import QualityError
from cumulus.quality.assets import make_offline
from cumulus.quality.frames import is_local
from cumulus.quality.spec import SuiteSpec
from cumulus.quality.summary import context_dir, site_dir

log = logging.getLogger("cumulus.quality")
EXAMPLES = 5  # failing rows kept per check in the summary
SITE = "cumulus"  # the one Data Docs site's name in <home>/gx/great_expectations.yml
BATCH = "frame"  # each asset's one Batch Definition: the whole frame handed to the run
ACTION = "update_data_docs"  # the name of every Checkpoint's UpdateDataDocsAction


@dataclass
class CheckOutcome:
    name: str  # meta.check of the expectation, e.g. maps.counts_not_negative
    expectation: str  # the GX expectation type
    description: str
    success: bool
    element_count: int | None = None
    unexpected_count: int | None = None
    examples: list[Any] = field(default_factory=list)  # a few failing rows (index columns + value)
    error: str | None = None  # the expectation raised instead of answering


@dataclass
class SuiteOutcome:
    name: str
    success: bool
    rows: int
    checks: list[CheckOutcome]
    page: Path | None = None  # the result's page in the Data Docs site


class GxRun:
    """One run (`run_name`, e.g. epoch-3) in the file-backed context of `home`: validate
    suites over frames; each Checkpoint's action updates the one Data Docs site.

    A run replaces the stored results of earlier runs of the same name (a re-validation
    of a failed epoch, or a retry after a crash): the site keeps one run per epoch; the
    earlier pages leave it when the run's first Checkpoint rebuilds the index."""

    def __init__(self, home: Path, run_name: str):
        # GX logs its own registrations at INFO, most of them while it is imported: keep
        # them out of the job's log (and out of the Airflow task's).
        logging.getLogger("great_expectations").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
        import great_expectations as gx

        _share_compiled_templates()
        self.gx = gx
        self.home = home
        self.site_dir = site_dir(home)
        self.run_name = run_name
        self.run_time = dt.datetime.now(dt.UTC)  # one for every suite of the run: one folder per run
        self.context = _file_context(gx, home, self.site_dir)
        store = self.context.validation_results_store
        earlier = [k for k in store.list_keys() if k.run_id.run_name == run_name]
        for key in earlier:
            store.remove_key(key)
        if earlier:
            log.info("%s: replacing %d stored validation result(s) of an earlier run", run_name, len(earlier))

    def _batch_definition(self, kind: str, asset_name: str):
        """The whole-frame Batch Definition of the asset `asset_name` of the `kind` source,
        added the first time."""
        sources = self.context.data_sources
        name = f"cumulus-{kind}"
        try:
            source = sources.get(name)
        except KeyError:
            source = sources.add_spark(name) if kind == "spark" else sources.add_pandas(name)
        try:
            asset = source.get_asset(asset_name)
        except LookupError:
            asset = source.add_dataframe_asset(name=asset_name)
        try:
            return asset.get_batch_definition(BATCH)
        except KeyError:
            return asset.add_batch_definition_whole_dataframe(BATCH)

    def build_suite(self, spec: SuiteSpec):
        """The suite of `spec` as stored in the context (added, or updated to the file)."""
        suite = self.gx.ExpectationSuite(
            name=spec.name,
            expectations=[c.as_gx() for c in spec.checks],
            notes=spec.notes or None,
            meta={"spec": spec.path.name, "sha256": spec.sha256},
        )
        if len(suite.expectations) != len(spec.checks):  # GX logs and drops an invalid one
            built = {e.meta.get("check") for e in suite.expectations}
            bad = [c.name for c in spec.checks if c.name not in built]
            raise QualityError(f"{spec.path}: GX refused the expectation(s) {', '.join(bad)} (see the log above)")
        return self.context.suites.add_or_update(suite)

    def checkpoint(self, spec: SuiteSpec, kind: str):
        """The stored Checkpoint `<suite>-<kind>` (its Validation Definition runs the suite
        over the asset's whole frame; its action updates the Data Docs site)."""
        gx = self.gx
        name = f"{spec.name}-{kind}"
        definition = self.context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=self._batch_definition(kind, spec.name), suite=self.build_suite(spec))
        )
        result_format: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": EXAMPLES}
        if spec.index_columns:
            result_format["unexpected_index_column_names"] = list(spec.index_columns)
        return self.context.checkpoints.add_or_update(
            gx.Checkpoint(
                name=name,
                validation_definitions=[definition],
                actions=[gx.checkpoint.UpdateDataDocsAction(name=ACTION, site_names=[SITE])],
                result_format=result_format,
            )
        )

    def validate(
        self, spec: SuiteSpec, frame, parameters: Mapping[str, Any] | None = None
    ) -> SuiteOutcome:
        """Run the suite over `frame` (a Spark or pandas DataFrame with spec.frame's columns)."""
        columns = list(frame.columns)
        if sorted(columns) != sorted(spec.frame):
            raise QualityError(
                f"suite {spec.name}: the frame has columns {columns}, {spec.path} declares {list(spec.frame)}"
            )
        kind = "pandas" if is_local(frame) else "spark"
        checkpoint = self.checkpoint(spec, kind)
        from great_expectations.core.run_identifier import RunIdentifier

        result = checkpoint.run(
            batch_parameters={"dataframe": frame},
            expectation_parameters=dict(parameters or {}),
            run_id=RunIdentifier(run_name=self.run_name, run_time=self.run_time),
        )
        ((key, suite_result),) = result.run_results.items()
        checks = [_check_outcome(r) for r in suite_result.results]
        rows = max((c.element_count or 0 for c in checks), default=0)
        outcome = SuiteOutcome(spec.name, all(c.success for c in checks), rows, checks, self._page(key, spec))
        failed = [c.name for c in checks if not c.success]
        log.info(
            "%s: suite %s %s (%d checks%s)", self.run_name, spec.name,
            "passed" if outcome.success else "FAILED", len(checks), f"; failed: {', '.join(failed)}" if failed else "",
        )
        return outcome

    def _page(self, key, spec: SuiteSpec) -> Path:
        """The page the Checkpoint's action wrote for the result `key`."""
        urls = self.context.get_docs_sites_urls(resource_identifier=key, site_names=[SITE], only_if_exists=True)
        url = next((u["site_url"] for u in urls if u.get("site_url")), None)
        if url is None:
            raise QualityError(f"{self.run_name}: suite {spec.name}: GX wrote no Data Docs page to {self.site_dir}")
        return Path(os.path.normpath(url.removeprefix("file://")))

    def finish(self) -> Path:
        """Make the site the Checkpoints updated render with no network (its scripts and
        styles from the deployment, assets.py, not from CDNs); returns its index.html."""
        index = self.site_dir / "index.html"
        if not index.is_file():
            raise QualityError(f"{self.run_name}: GX did not write the Data Docs index {index}")
        make_offline(self.site_dir)
        return index


def _share_compiled_templates() -> None:
    """GX renders every Data Docs page with a new Jinja environment (one per view), so it
    compiles the same templates again for every page: about 1 s of every Checkpoint's
    UpdateDataDocsAction here, most of a tiny epoch's suite. Every view of this process
    gets one in-memory bytecode cache (Jinja's own hook: a template whose source changed
    is compiled again); the pages are the same."""
    import jinja2
    from great_expectations.render.view.view import DefaultJinjaView

    if getattr(DefaultJinjaView, "_cumulus_templates", None) is not None:
        return

    class Compiled(jinja2.BytecodeCache):
        def __init__(self) -> None:
            self.codes: dict[str, tuple[str, Any]] = {}

        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            checksum, code = self.codes.get(bucket.key, (None, None))
            if checksum == bucket.checksum:
                bucket.code = code

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            self.codes[bucket.key] = (bucket.checksum, bucket.code)

    compiled, init = Compiled(), DefaultJinjaView.__init__

    def shared(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.env.bytecode_cache = compiled

    DefaultJinjaView.__init__ = shared  # type: ignore[method-assign]
    DefaultJinjaView._cumulus_templates = compiled  # type: ignore[attr-defined]


def _file_context(gx, home: Path, site: Path):
    """The file-backed Data Context of `home` (`<home>/gx/`, scaffolded by GX the first
    time), with the one Data Docs site `site` as its only site and no progress bars."""
    from great_expectations.data_context.types.base import ProgressBarsConfig

    home.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=home)
    root = Path(context.root_directory)
    if root != context_dir(home):
        raise QualityError(f"GX opened its Data Context at {root}, not at {context_dir(home)}")
    wanted = {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        # relative to the context: the home can move
        "store_backend": {
            "class_name": "TupleFilesystemStoreBackend",
            "base_directory": Path(os.path.relpath(site, root)).as_posix() + "/",
        },
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    }
    sites = dict(context.list_data_docs_sites())
    for name in sorted(set(sites) - {SITE}):  # GX's scaffold adds a local_site
        context.delete_data_docs_site(name)
    if SITE not in sites:
        context.add_data_docs_site(SITE, wanted)
    elif sites[SITE] != wanted:
        context.update_data_docs_site(SITE, wanted)
    bars = context.variables.progress_bars  # a dict once read back from the file
    if (bars.get("globally") if isinstance(bars, dict) else getattr(bars, "globally", None)) is not False:
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.variables.save()
    return context


def _check_outcome(r) -> CheckOutcome:
    config = r.expectation_config
    result = dict(r.result or {})
    info = r.exception_info or {}
    error = info.get("exception_message") if info.get("raised_exception") else None
    examples = result.get("partial_unexpected_index_list") or result.get("partial_unexpected_list") or []
    if not examples and not r.success and "observed_value" in result:
        examples = [{"observed_value": result["observed_value"]}]
    return CheckOutcome(
        name=str((config.meta or {}).get("check") or config.type),
        expectation=config.type,
        description=config.description or "",
        success=bool(r.success),
        element_count=result.get("element_count"),
        unexpected_count=result.get("unexpected_count"),
        examples=[_plain(e) for e in examples[:EXAMPLES]],
        error=error,
    )


def _plain(value: Any) -> Any:
    """JSON-safe copies of GX's example values (tuples, numpy scalars, decimals)."""
    import json

    return json.loads(json.dumps(value, default=str))
