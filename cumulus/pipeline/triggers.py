"""Airflow triggers of the pipeline: they run in the triggerer (an asyncio loop), so a task
that waits holds no worker slot and no pool slot while it waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from cumulus.errors import CumulusError
from cumulus.pipeline.client import EngineClient


class LandingReadyTrigger(BaseTrigger):
    """Fires {"ready": True} once `folder` is ready (its `ready_marker` file, or any file
    when the marker is ""), or {"ready": False} at `deadline` (epoch seconds)."""

    def __init__(self, folder: str, ready_marker: str, poke_seconds: float, deadline: float):
        super().__init__()
        self.folder = folder
        self.ready_marker = ready_marker
        self.poke_seconds = poke_seconds
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"folder": self.folder, "ready_marker": self.ready_marker, "poke_seconds": self.poke_seconds,
             "deadline": self.deadline},
        )

    def _ready(self) -> bool:
        from pathlib import Path

        from cumulus.ingest.landing import folder_ready

        return folder_ready(Path(self.folder), self.ready_marker)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            if await asyncio.to_thread(self._ready):
                yield TriggerEvent({"ready": True})
                return
            left = self.deadline - time.time()
            if left <= 0:
                yield TriggerEvent({"ready": False})
                return
            await asyncio.sleep(min(self.poke_seconds, left))


class EngineStepTrigger(BaseTrigger):
    """Follows a step handed to the warm engine (cumulus.pipeline.server): logs its lines as
    they come (they land in the task's log) and fires {"exit": N} when it is done, or
    {"error": why} when the engine stops answering for `patience` seconds. `offset`: the
    step's log lines the task logged already, before it deferred."""

    def __init__(self, url: str, step_id: int, poke_seconds: float = 1.0, patience: float = 30.0, offset: int = 0):
        super().__init__()
        self.url = url
        self.step_id = step_id
        self.poke_seconds = poke_seconds
        self.patience = patience
        self.offset = offset

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"url": self.url, "step_id": self.step_id, "poke_seconds": self.poke_seconds, "patience": self.patience,
             "offset": self.offset},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        client, offset, silent_since = EngineClient(self.url), self.offset, None
        while True:
            try:
                got = await asyncio.to_thread(client.step, self.step_id, offset)
            except CumulusError as exc:
                silent_since = silent_since or time.monotonic()
                if time.monotonic() - silent_since > self.patience:
                    yield TriggerEvent({"error": str(exc)})
                    return
                await asyncio.sleep(self.poke_seconds)
                continue
            silent_since = None
            for line in got["lines"]:
                self.log.info("%s", line)
            offset = got["next"]
            if got["state"] == "done":
                yield TriggerEvent({"exit": got["exit"], "lines": offset})
                return
            await asyncio.sleep(self.poke_seconds)
