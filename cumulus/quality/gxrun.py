"""Great Expectations (GX Core 1.x) for one epoch: an ephemeral Data Context (nothing
written but the Data Docs site), a Spark and a pandas Data Source with one dataframe
Data Asset per suite, a Validation Definition and a Checkpoint per suite, and a Data Docs
site at `<home>/reports/epoch-N/`. The suites come from expectations/*.yml (spec.py).

GX is imported only here, and only when validation runs: the import alone takes 10-20 s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cumulus.errors import QualityError
from cumulus.quality.assets import make_offline
from cumulus.quality.spec import SuiteSpec

log = logging.getLogger("cumulus.quality")
EXAMPLES = 5  # failing rows kept per check in the summary


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


class GxRun:
    """One epoch's GX context: run suites over frames, then build the Data Docs site."""

    def __init__(self, site_dir: Path, site_name: str, run_name: str):
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        # GX logs its own registrations at INFO; keep them out of the job's log.
        logging.getLogger("great_expectations").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
        self.gx = gx
        self.site_dir = site_dir
        self.site_name = site_name
        self.run_name = run_name
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False),
            data_docs_sites={
                site_name: {
                    "class_name": "SiteBuilder",
                    "show_how_to_buttons": False,
                    "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(site_dir)},
                    "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                }
            },
        )
        self.context = gx.get_context(project_config=config, mode="ephemeral")
        self._sources: dict[str, Any] = {}

    def _source(self, kind: str):
        if kind not in self._sources:
            sources = self.context.data_sources
            self._sources[kind] = (
                sources.add_spark("cumulus-spark") if kind == "spark" else sources.add_pandas("cumulus-pandas")
            )
        return self._sources[kind]

    def build_suite(self, spec: SuiteSpec):
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
        return self.context.suites.add(suite)

    def validate(
        self, spec: SuiteSpec, frame, parameters: Mapping[str, Any] | None = None
    ) -> SuiteOutcome:
        """Run the suite over `frame` (a Spark or pandas DataFrame with spec.frame's columns)."""
        columns = list(frame.columns)
        if sorted(columns) != sorted(spec.frame):
            raise QualityError(
                f"suite {spec.name}: the frame has columns {columns}, {spec.path} declares {list(spec.frame)}"
            )
        kind = "pandas" if type(frame).__module__.startswith("pandas") else "spark"
        asset = self._source(kind).add_dataframe_asset(name=spec.name)
        batch = asset.add_batch_definition_whole_dataframe(self.run_name)
        suite = self.build_suite(spec)
        definition = self.context.validation_definitions.add(
            self.gx.ValidationDefinition(name=f"{spec.name} {self.run_name}", data=batch, suite=suite)
        )
        result_format: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": EXAMPLES}
        if spec.index_columns:
            result_format["unexpected_index_column_names"] = list(spec.index_columns)
        checkpoint = self.context.checkpoints.add(
            self.gx.Checkpoint(
                name=f"{self.run_name} {spec.name}",
                validation_definitions=[definition],
                actions=[],
                result_format=result_format,
            )
        )
        from great_expectations.core.run_identifier import RunIdentifier

        result = checkpoint.run(
            batch_parameters={"dataframe": frame},
            expectation_parameters=dict(parameters or {}),
            run_id=RunIdentifier(run_name=self.run_name),
        )
        (suite_result,) = result.run_results.values()
        checks = [_check_outcome(r) for r in suite_result.results]
        rows = max((c.element_count or 0 for c in checks), default=0)
        outcome = SuiteOutcome(spec.name, all(c.success for c in checks), rows, checks)
        failed = [c.name for c in checks if not c.success]
        log.info(
            "%s: suite %s %s (%d checks%s)", self.run_name, spec.name,
            "passed" if outcome.success else "FAILED", len(checks), f"; failed: {', '.join(failed)}" if failed else "",
        )
        return outcome

    def build_docs(self) -> Path:
        """Write the Data Docs site, loading its scripts and styles from the deployment
        (assets.py), not from CDNs; returns its index.html."""
        self.context.build_data_docs(site_names=[self.site_name])
        index = self.site_dir / "index.html"
        if not index.is_file():
            raise QualityError(f"GX did not write the Data Docs index {index}")
        make_offline(self.site_dir)
        return index


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
