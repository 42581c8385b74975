"""Headless Chromium for tests that look at the pages a person opens (the Airflow UI, the
plugin page, Data Docs, dbt docs), driven over the DevTools protocol (websockets).

`Browser(profile, offline=True)` resolves no host but loopback, as on a machine without
internet access; `loads()` then lists what a page asked for, and what failed."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

# Chromium's own background traffic (updates, sync, safe browsing) stays off: on a closed
# network it is refused many times over and says nothing about the page.
QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-quic", "--disable-default-apps"]
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"


class Browser:
    def __init__(self, profile: Path, offline: bool = False):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise AssertionError("chromium not found: run `make setup` (scripts/setup.sh installs it)")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1440,900",
             "--hide-scrollbars", *QUIET, *([OFFLINE] if offline else []), "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                break
        else:
            raise AssertionError("chromium did not open its DevTools port")
        port = int(re.search(r":(\d+)/", m.group(1)).group(1))
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=None, open_timeout=30)
        self._id = 0
        self.events: list[dict] = []
        self.call("Page.enable")
        self.call("Network.enable")

    def call(self, method: str, **params):
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serializable)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def set_cookie(self, name: str, value: str, url: str) -> None:
        self.call("Network.setCookie", name=name, value=value, url=url)

    def open(self, url: str, expect: tuple[str, ...] = (), timeout: float = 60, quiet: float = 1.0,
             linger: float = 6.0) -> str:
        """Load `url` and wait until the page is loaded and its text holds every string of
        `expect` (a single-page app draws after the load), then until no request of its
        own has been pending for `quiet` seconds (at most `linger`: a page may poll); its
        text (what it shows by `timeout`)."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        shown = quiet_since = None
        while True:
            text = self.evaluate("document.readyState === 'complete' && document.body ? document.body.innerText : null")
            now = time.monotonic()
            quiet_since = None if self._pending() else (quiet_since or now)
            if shown is None and text is not None and all(e in text for e in expect):
                shown = now
            if shown is not None and ((quiet_since and now - quiet_since >= quiet) or now - shown >= linger):
                return text or ""
            if now > deadline:
                return text or ""
            time.sleep(0.25)

    def _pending(self) -> set[str]:
        """The page's requests since it was opened that have neither finished nor failed."""
        asked = {e["params"]["requestId"] for e in self.events if e["method"] == "Network.requestWillBeSent"}
        done = {e["params"]["requestId"] for e in self.events
                if e["method"] in ("Network.loadingFinished", "Network.loadingFailed")}
        return asked - done

    def loads(self) -> tuple[list[str], list[str]]:
        """(every address the page asked for since it was opened, those that failed)."""
        self.call("Runtime.evaluate", expression="0")  # collect the events pending
        asked = {e["params"]["requestId"]: e["params"]["request"]["url"]
                 for e in self.events if e["method"] == "Network.requestWillBeSent"}
        failed = [asked.get(e["params"]["requestId"], "?") + f" ({e['params'].get('errorText')})"
                  for e in self.events if e["method"] == "Network.loadingFailed"]
        return list(asked.values()), failed

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
