"""Messages put and got today and yesterday, and the current rates: RocketMQ's BrokerStats.

mqadmin's clusterList shows, per broker, the messages put and got since midnight today and
over yesterday (local time), and the put and get TPS. RocketMQ keeps the daily counters in
memory, so a restart zeroes "today"; here they are kept in config/brokerStats.json with
their day, so a restart goes on counting (a SIGKILL loses what came after the last save).
`sample` is fed the store's running totals about once a second; the rates are the last
sample's. This module never reads the store itself.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable

from .json_file import JsonFile

class DailyStats:
    def __init__(self, config_dir: str, clock: Callable[[], float] = time.time) -> None:
        self.file = JsonFile(os.path.join(config_dir, "brokerStats.json"))
        self._clock = clock
        self.day = self._today()
        self.put_today = self.get_today = self.put_yesterday = self.get_yesterday = 0
        self.put_tps = self.get_tps = 0.0
        self._last: tuple[float, int, int] | None = None  # (time, put total, get total) of the last sample

    def _today(self) -> str:
        return datetime.date.fromtimestamp(self._clock()).isoformat()

    def load(self) -> None:
        """The day's counts a previous run saved; the store's totals start from 0 now."""
        self._last = (self._clock(), 0, 0)
        data = self.file.load() or {}
        day = data.get("day")
        if day == self.day:
            self.put_today, self.get_today = int(data.get("putToday", 0)), int(data.get("getToday", 0))
            self.put_yesterday, self.get_yesterday = int(data.get("putYesterday", 0)), int(data.get("getYesterday", 0))
        elif day == (datetime.date.fromisoformat(self.day) - datetime.timedelta(days=1)).isoformat():
            self.put_yesterday, self.get_yesterday = int(data.get("putToday", 0)), int(data.get("getToday", 0))

    def sample(self, put_total: int, get_total: int) -> None:
        """The store's running totals now (messages put and got since it started)."""
        now = self._clock()
        day = self._today()
        if day != self.day:  # midnight passed: today becomes yesterday (or nothing, after a gap)
            consecutive = datetime.date.fromisoformat(day) - datetime.date.fromisoformat(self.day)
            one_day = consecutive == datetime.timedelta(days=1)
            self.put_yesterday = self.put_today if one_day else 0
            self.get_yesterday = self.get_today if one_day else 0
            self.put_today = self.get_today = 0
            self.day = day
        if self._last is not None:
            then, put_before, get_before = self._last
            put, got = max(0, put_total - put_before), max(0, get_total - get_before)
            self.put_today += put
            self.get_today += got
            elapsed = now - then
            if elapsed > 0:
                self.put_tps, self.get_tps = put / elapsed, got / elapsed
        self._last = (now, put_total, get_total)

    def save(self) -> None:
        """Write the day's counters (blocking: the owner runs it in a worker thread)."""
        self.file.save({"day": self.day, "putToday": self.put_today, "getToday": self.get_today,
                        "putYesterday": self.put_yesterday, "getYesterday": self.get_yesterday})
