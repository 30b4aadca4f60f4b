"""How late the event loop runs what is due: a probe that sleeps a fixed interval and
measures how much later it woke. Every client of the broker waits at least this long for
anything; a growing figure means some work holds the loop."""

from __future__ import annotations

import asyncio
import time
from typing import Final

INTERVAL_S: Final = 0.25


class LoopLag:
    """Started and stopped by the HTTP front-end; `take` gives the largest lag since the
    last take (so a scrape every 15 s sees the worst moment in between) and the latest."""

    def __init__(self) -> None:
        self.latest = 0.0
        self._worst = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._probe(), name="http-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def take(self) -> tuple[float, float]:
        """(latest lag, worst lag since the previous take), in seconds."""
        worst, self._worst = max(self._worst, self.latest), 0.0
        return self.latest, worst

    async def _probe(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(INTERVAL_S)
            self.latest = max(0.0, time.monotonic() - before - INTERVAL_S)
            if self.latest > self._worst:
                self._worst = self.latest
