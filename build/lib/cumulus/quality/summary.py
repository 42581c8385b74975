"""An epoch's validation summary: `<home>/reports/epoch-N/summary.json`, the short form of
it in the ledger's `validation_detail`, and the report the CLI prints from either; and
where the reports live. Plain data and files: no GX, no JVM.

    <home>/gx/                        the file-backed GX Data Context (gxrun.py)
    <home>/reports/data_docs/         the one Data Docs site: every epoch's validation results
    <home>/reports/epoch-N/           summary.json, and index.html forwarding to the epoch's
                                      page in the site (the report)
    <home>/reports/_assets/           what the site's pages load (assets.py)

summary.json:
    {"epoch": 3, "outcome": "passed" | "failed", "validated_at": "...",
     "report": ".../reports/data_docs/validations/<suite>/epoch-3/<run time>/<batch>.html",
     "data_docs": ".../reports/data_docs/index.html", "summary": ".../summary.json",
     "suites": [{"suite": "maps", "success": true, "rows": 42, "spec": "maps.yml", "sha256": "...",
                 "tables": [...], "page": ".../validations/maps/epoch-3/.../....html",
                 "checks": [{"check": "maps.counts_not_negative", "success": true,
                 "expectation": "...", "description": "...", "element_count": 42,
                 "unexpected_count": 0, "examples": [], "error": null}, ...]}, ...],
     "views": [{"view": "sales", "success": true, "engine_rows": 3, "recomputed_rows": 3,
                "differences": [...a few...], "error": null}],
     "skipped": {"views": [...], "maps": [...]}, "failed_checks": [...], "seconds": 12.3}

The report is the page of the epoch's first failed suite, or of its first suite when all
passed (each page links the site's index, which lists every epoch's results).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cumulus.config import Settings
from cumulus.output import render

SUMMARY_FILE = "summary.json"
EPOCH_PAGE = "index.html"  # in reports/epoch-N/: forwards to the epoch's report
REPORTS = "reports"
GX_DIR = "gx"  # the folder GX's file-backed context scaffolds under its project root
SITE_DIR = "data_docs"
PASSED, FAILED = "passed", "failed"
REPORT_COLUMNS = ("suite", "check", "status", "rows", "unexpected", "detail")


def reports_root(home: Path) -> Path:
    """`<home>/reports/`: what the Airflow plugin serves at /cumulus/reports/."""
    return home / REPORTS


def context_dir(home: Path) -> Path:
    """`<home>/gx/`: the file-backed GX Data Context (suites, validation definitions,
    checkpoints, and every validation result under uncommitted/validations/)."""
    return home / GX_DIR


def site_dir(home: Path) -> Path:
    """`<home>/reports/data_docs/`: the one Data Docs site, every epoch's results."""
    return reports_root(home) / SITE_DIR


def report_dir(settings: Settings, epoch: int) -> Path:
    return reports_root(settings.home) / f"epoch-{epoch}"


def summary_path(settings: Settings, epoch: int) -> Path:
    return report_dir(settings, epoch) / SUMMARY_FILE


def write_summary(settings: Settings, summary: Mapping[str, Any]) -> Path:
    path = summary_path(settings, int(summary["epoch"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)  # readers never see half a file
    return path


def report_page(suites: list[Mapping[str, Any]]) -> str:
    """The epoch's report: the page of its first failed suite, else of its first suite."""
    pages = [s for s in suites if s.get("page")]
    if not pages:
        raise ValueError("no suite of the summary has a Data Docs page")
    return next((s["page"] for s in pages if not s["success"]), pages[0]["page"])


FORWARD = """<!doctype html>
<html><head><meta charset="utf-8"><title>Epoch {epoch}: validation</title>
<meta http-equiv="refresh" content="0; url={href}"></head>
<body><p>Epoch {epoch}'s validation: <a href="{href}">its page in the Data Docs site</a>
(<a href="{index}">Data Docs: all epochs</a>).</p></body></html>
"""


def write_epoch_page(settings: Settings, epoch: int, report: Path) -> Path:
    """`reports/epoch-N/index.html`, forwarding to the epoch's `report` in the site (by
    relative address: it opens from disk and through the Airflow plugin alike)."""
    from urllib.parse import quote

    folder = report_dir(settings, epoch)
    folder.mkdir(parents=True, exist_ok=True)

    def href(target: Path) -> str:
        return html.escape(quote(Path(os.path.relpath(target, folder)).as_posix()))

    path = folder / EPOCH_PAGE
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(FORWARD.format(epoch=epoch, href=href(report), index=href(site_dir(settings.home) / "index.html")))
    tmp.replace(path)
    return path


def read_summary(settings: Settings, epoch: int) -> dict[str, Any] | None:
    path = summary_path(settings, epoch)
    return json.loads(path.read_text()) if path.is_file() else None


def summary_from_ledger(settings: Settings, epoch: int, row) -> dict[str, Any]:
    """A summary for an epoch whose summary.json is gone: what the ledger remembers."""
    detail = json.loads(row.validation_detail) if row.validation_detail else {}
    return {
        "epoch": epoch,
        "outcome": row.validation or "",
        "validated_at": str(row.updated_at),
        "report": detail.get("report", str(report_dir(settings, epoch) / "index.html")),
        "summary": detail.get("summary", str(summary_path(settings, epoch))),
        "suites": [],
        "views": [],
        "skipped": {},
        "failed_checks": detail.get("failed_checks", []),
        "from_ledger": True,
    }


def ledger_detail(summary: Mapping[str, Any]) -> str:
    """The short JSON the ledger keeps in validation_detail."""
    checks = [c for s in summary["suites"] for c in s["checks"]]
    return json.dumps(
        {
            "outcome": summary["outcome"],
            "report": summary["report"],
            "summary": summary["summary"],
            "checks": len(checks),
            "failed": len(summary["failed_checks"]),
            "failed_checks": summary["failed_checks"][:20],
            "views_differing": [v["view"] for v in summary.get("views", []) if not v["success"]],
        },
        sort_keys=False,
    )


def failed_checks(suites: list[Mapping[str, Any]], views: list[Mapping[str, Any]]) -> list[str]:
    """Names of the failed checks; a differing view is named as oracle.<view>."""
    names = [c["check"] for s in suites for c in s["checks"] if not c["success"]]
    names += [f"oracle.{v['view']}" for v in views if not v["success"]]
    return names


def report_rows(summary: Mapping[str, Any]) -> list[tuple]:
    """One row per check (and per view of the oracle) for `cumulus quality report`."""
    rows = []
    for suite in summary["suites"]:
        for c in suite["checks"]:
            detail = c.get("error") or ("" if c["success"] else _examples(c.get("examples") or []))
            rows.append(
                (suite["suite"], c["check"], "ok" if c["success"] else "FAILED", c.get("element_count"),
                 c.get("unexpected_count"), detail)
            )
    for v in summary.get("views", []):
        if v.get("error"):
            detail = v["error"]
        elif v["success"]:
            n = v["engine_rows"]
            detail = f"{n} row{'s' if n != 1 else ''} equal"
        else:
            detail = _examples([d["difference"] + f" (group {d['group']})" for d in v["differences"]])
        rows.append(
            ("oracle", f"oracle.{v['view']}", "ok" if v["success"] else "FAILED", v["engine_rows"],
             len(v["differences"]), detail)
        )
    return rows


def render_report(summary: Mapping[str, Any], fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(summary, indent=2, default=str) + "\n"
    head = (
        f"epoch {summary['epoch']}: validation {summary['outcome']}"
        + (f" ({len(summary['failed_checks'])} failed: {', '.join(summary['failed_checks'])})" if summary["failed_checks"] else "")
        + "\n"
    )
    skipped = summary.get("skipped") or {}
    notes = ""
    if skipped.get("views"):
        notes += f"skipped views (registered after epoch {summary['epoch']}): {', '.join(skipped['views'])}\n"
    body = render(list(REPORT_COLUMNS), report_rows(summary), fmt)
    if summary.get("data_docs"):
        notes += f"data docs (every epoch): {summary['data_docs']}\n"
    return head + body + notes + f"report: {summary['report']}\n"


def _examples(examples: list[Any], limit: int = 3) -> str:
    shown = [json.dumps(e, default=str) if not isinstance(e, str) else e for e in examples[:limit]]
    more = f" (+{len(examples) - limit} more)" if len(examples) > limit else ""
    return "; ".join(shown) + more
