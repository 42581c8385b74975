"""Airflow 3 UI plugin: the Cumulus ledger in Airflow's navigation ("Cumulus").

A FastAPI app mounted at /cumulus on the API server:
    /cumulus/             the page: plots over epochs (seconds per close step, events,
                          the lag to the consistent snapshot, validation; inline SVG),
                          epochs (state, counts, timings, validation, a link to the
                          epoch's validation page in the Data Docs site, late files),
                          views (stable rows, age, freshness) and a link to the site's
                          index ("Data Docs: all epochs")
    /cumulus/api/status   the same as JSON (cumulus.pipeline.status.pipeline_status)
    /cumulus/reports/...  <home>/reports/: the one Data Docs site (data_docs/, every
                          epoch's validation results), its assets (_assets/) and each
                          epoch's summary.json and forwarding index.html (epoch-N/)
and an external view that shows the page inside the UI (an iframe at /plugin/cumulus).
It reads the home's tables with PyIceberg (no JVM). The home is $CUMULUS_HOME of the API
server.

Every route, the reports too, is behind Airflow's auth manager: a request carries the
user's token (the UI's `_token` cookie, which the iframe sends, or an `Authorization:
Bearer` header from POST /auth/token) and the auth manager must let that user see the
custom view "Cumulus" (is_authorized_custom_view); else 401 (no or a bad token) or 403.
"""

from __future__ import annotations

import html
import os
import sys
import threading
from typing import Any
from urllib.parse import quote, urlsplit

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

BASE_PATH = urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


_LOCK = threading.Lock()
WARMED = threading.Event()  # set once the status was read at start (or failed to be)


def _status() -> dict[str, Any]:
    """The status of the home (pipeline_status keeps what it read per table version: a
    page costs one catalog query while nothing changed). One reading at a time: a request
    during another waits for it and finds what it kept."""
    from cumulus.config import load_settings, pipeline_home
    from cumulus.pipeline.status import pipeline_status

    with _LOCK:
        return pipeline_status(load_settings(pipeline_home()))


def _serves_pages() -> bool:
    """Whether this process is Airflow's API server (every Airflow process imports the
    plugins; only that one serves the page). $CUMULUS_PLUGIN_WARM_UP=1 or 0 decides."""
    forced = os.environ.get("CUMULUS_PLUGIN_WARM_UP")
    if forced in ("0", "1"):
        return forced == "1"
    return "api-server" in " ".join(sys.argv) or "api_server" in " ".join(sys.argv)


def _warm() -> None:
    """Read the status once when the API server starts, so the first page finds the
    ledger's files and the views compiled (a home of 100 epochs: seconds, once)."""
    try:
        _status()
    except Exception:  # noqa: BLE001 - a home not made yet: the page says so when asked
        pass
    finally:
        WARMED.set()


def _cell(value: Any) -> str:
    if value is None or value == "":
        return '<td class="none">–</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _epoch_rows(epochs: list[dict]) -> str:
    rows = []
    for e in reversed(epochs):
        report = (f'<td><a href="reports/{html.escape(quote(e["report"]))}" target="_blank" '
                  f'title="epoch {e["epoch"]} in the Data Docs site">report</a></td>'
                  if e["report"] else _cell(None))
        validation = e["validation"] or ""
        detail = html.escape(e["validation_detail"] or "")
        late = "; ".join(f'{x["kind"]} {x["source"]}: {x["folder"].rsplit("/", 1)[-1]}' for x in e["late"])
        rows.append(
            f'<tr class="{html.escape(e["state"])}"><td>{e["epoch"]}</td>'
            f'<td><span class="state">{html.escape(e["state"])}</span></td>'
            + "".join(_cell(e[k]) for k in ("events", "rejected", "files", "batches", "deltas"))
            + _cell(_duration(e["open_seconds"])) + _cell(_duration(e["close_seconds"]))
            + _cell((e["closed_at"] or "")[:19].replace("T", " ") or None)
            + f'<td title="{detail}">{html.escape(validation) or "–"}</td>' + report + _cell(late or None)
            + "</tr>"
        )
    return "\n".join(rows)


def _data_docs(index: str | None) -> str:
    """The link to the Data Docs site's index: every epoch's validation results."""
    if not index:
        return ""
    return f' · <a id="data-docs" href="reports/{html.escape(quote(index))}" target="_blank">Data Docs: all epochs</a>'


def _view_rows(views: list[dict]) -> str:
    rows = []
    for v in views:
        rows.append(
            f"<tr><td>{html.escape(v['name'])}</td>" + _cell(v.get("refresh")) + _cell(v.get("refresh_reason") or None)
            + _cell(v["stable_epoch"]) + _cell(v["stable_rows"])
            + _cell(_duration(v["stable_age_s"])) + _cell(_duration(v["fresh_age_s"])) + _cell(v["error"]) + "</tr>"
        )
    return "\n".join(rows)


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Cumulus ledger</title>
<meta http-equiv="refresh" content="30">
<style>
 body {{ font-family: system-ui, sans-serif; margin: 1.2rem; color: #1a202c; }}
 h1 {{ font-size: 1.3rem; margin: 0 0 .3rem; }} h2 {{ font-size: 1.05rem; margin: 1.4rem 0 .4rem; }}
 .meta {{ color: #4a5568; font-size: .85rem; }}
 table {{ border-collapse: collapse; font-size: .85rem; }}
 th, td {{ border-bottom: 1px solid #e2e8f0; padding: .3rem .6rem; text-align: right; }}
 th {{ background: #f7fafc; }} td:first-child, th:first-child {{ text-align: left; }}
 td.none {{ color: #a0aec0; }}
 .state {{ border-radius: .6rem; padding: .05rem .5rem; background: #edf2f7; }}
 tr.published .state {{ background: #c6f6d5; }} tr.failed-validation .state {{ background: #fed7d7; }}
 tr.open .state {{ background: #bee3f8; }} tr.closed .state, tr.applied .state {{ background: #fefcbf; }}
 #plots {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(640px, 1fr)); gap: .4rem 1rem; }}
</style></head><body>
<h1>Cumulus ledger</h1>
<div class="meta">home {home} · open epoch {open_epoch} · read {generated_at} (PyIceberg) ·
 <a href="api/status">JSON</a>{data_docs}</div>
<h2>Over epochs</h2>
<div id="plots">{plots}</div>
<h2>Epochs</h2>
<table id="epochs"><tr><th>epoch</th><th>state</th><th>events</th><th>rejected</th><th>files</th>
<th>batches</th><th>deltas</th><th>open for</th><th>close took</th><th>closed at (UTC)</th>
<th>validation</th><th>report</th><th>late files</th></tr>
{epoch_rows}
</table>
<h2>Views</h2>
<table id="views"><tr><th>view</th><th>refresh</th><th>why full</th><th>stable epoch</th><th>stable rows</th><th>stable age</th>
<th>main age (last map commit)</th><th>note</th></tr>
{view_rows}
</table>
</body></html>"""


RESOURCE = "Cumulus"  # the custom view the auth manager is asked about


async def _refusal(request: Request) -> JSONResponse | None:
    """None when the request's user may see the Cumulus page, else the response that
    says why not (401: no or a bad token; 403: the auth manager says no)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
    from airflow.api_fastapi.core_api.security import resolve_user_from_token
    from fastapi import HTTPException

    header = request.headers.get("authorization", "")
    token = header[7:] if header.lower().startswith("bearer ") else request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    try:
        user = await resolve_user_from_token(token)
    except HTTPException as exc:
        return JSONResponse({"detail": f"{exc.detail}: sign in to Airflow (or send a bearer token)"},
                            status_code=exc.status_code)
    if not get_auth_manager().is_authorized_custom_view(method="GET", resource_name=RESOURCE, user=user):
        return JSONResponse({"detail": f"user {user.get_name()} may not see {RESOURCE}"}, status_code=403)
    return None


def create_app() -> FastAPI:
    from cumulus.config import pipeline_home
    from cumulus.pipeline.plots import all_plots

    app = FastAPI(title="Cumulus", description="The Cumulus ledger and views (read with PyIceberg)")

    @app.middleware("http")
    async def authenticate(request: Request, call_next):  # every route and the mounted reports
        refused = await _refusal(request)
        return refused if refused is not None else await call_next(request)

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        s = _status()
        return PAGE.format(
            home=html.escape(s["home"]), open_epoch=s["open_epoch"], generated_at=s["generated_at"],
            epoch_rows=_epoch_rows(s["epochs"]), view_rows=_view_rows(s["views"]),
            plots="\n".join(all_plots(s["epochs"])), data_docs=_data_docs(s.get("data_docs")),
        )

    @app.get("/api/status")
    def status() -> JSONResponse:
        return JSONResponse(_status())

    if _serves_pages():
        threading.Thread(target=_warm, name="cumulus-status-warm-up", daemon=True).start()
    else:
        WARMED.set()
    reports = pipeline_home() / "reports"
    app.mount("/reports", StaticFiles(directory=str(reports), html=True, check_dir=False), name="reports")
    return app


class CumulusPlugin(AirflowPlugin):
    name = "cumulus"
    fastapi_apps = [{"name": "cumulus", "app": create_app(), "url_prefix": "/cumulus"}]
    external_views = [
        {
            "name": "Cumulus",
            "href": f"{BASE_PATH}/cumulus/",
            "destination": "nav",
            "url_route": "cumulus",
        }
    ]
