"""``PlatformFileTrigger``: an event trigger (for an ``AssetWatcher``) that fires when the platform file changes.

It runs in the triggerer: one coroutine reading the file's SHA-256 every ``poll_seconds``, which costs no
worker slot and no task instance per check (a sensor would hold a slot, or create a try per poke). The first
digest it reads is its baseline, so a restart of the triggerer does not fire by itself; a change made while no
triggerer ran is picked up by the DAG's hourly run (the sync is level-triggered, so that is enough).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent


def file_digest(path: str) -> str | None:
    """SHA-256 of the file's bytes, or None while it is missing/unreadable (a deploy may replace it)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


class PlatformFileTrigger(BaseEventTrigger):
    def __init__(self, path: str, poll_seconds: float = 5.0) -> None:
        super().__init__()
        self.path, self.poll_seconds = path, poll_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return "operators.platform.trigger.PlatformFileTrigger", {"path": self.path,
                                                                  "poll_seconds": self.poll_seconds}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        baseline = await asyncio.to_thread(file_digest, self.path)
        while True:
            await asyncio.sleep(self.poll_seconds)
            digest = await asyncio.to_thread(file_digest, self.path)
            if digest is not None and digest != baseline:
                baseline = digest
                self.log.info("platform file %s changed (sha256 %s)", self.path, digest[:12])
                yield TriggerEvent({"path": self.path, "sha256": digest})
