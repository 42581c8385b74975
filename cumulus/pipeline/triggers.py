"""Airflow triggers of the pipeline: they run in the triggerer (an asyncio loop), so a task
that waits holds no worker slot and no pool slot while it waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


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

        from cumulus.pipeline.epochs import folder_ready

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
