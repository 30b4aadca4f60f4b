"""Per-topic and per-group message rates over the last minute, hour and day: the figures
RocketMQ's BrokerStatsManager keeps for VIEW_BROKER_STATS_DATA (mqadmin statsAll).

RocketMQ counts on the hot path (every put adds to TOPIC_PUT_NUMS, every pull to
GROUP_GET_NUMS). Here nothing is counted per message: `sample` is given running totals
that the broker already has (a topic's messages put is the sum of its ConsumeQueues' max
offsets; a group's messages got on a topic is the sum of its committed offsets), every
10 s, and a window's figure is the difference between its oldest and newest sample, as
RocketMQ's StatsItem computes it from its own 10 s / 10 min / 1 h samples. A topic's total
is the sum of its ConsumeQueues' max offsets; a group's is how far its committed offsets
moved forward since start-up (ConsumerOffsetManager.consumed). So a group's messages count
when their offsets are committed, not when pulled (a redelivery counts once), a queue's
first commit is its starting point (a new group may start at the end of a topic it never
read), and an offset reset forward counts the skipped messages. A total that goes down (a
topic deleted and made again) starts the key's windows again from the new value.

Only keys whose total changed since the broker started keep samples, so idle topics and
groups cost one integer each. A query passes the key's total now, so a window always
ends at the present. Samples are not persisted: like RocketMQ's, the windows
start empty at start-up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, GROUP_GET_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS)

SAMPLE_S = 10.0
# (seconds between samples, samples kept): RocketMQ's minute, hour and day windows
_WINDOWS = ((SAMPLE_S, 7), (600.0, 7), (3600.0, 25))


@dataclass(slots=True, frozen=True)
class WindowStats:
    """One window's figures, as RocketMQ's BrokerStatsItem: messages in the window and
    their rate. ``avgpt`` (the average per put or pull call) is RocketMQ's third figure;
    totals carry no call counts, so it is 0 here."""

    sum: int
    tps: float
    avgpt: float = 0.0


@dataclass(slots=True, frozen=True)
class StatsData:
    minute: WindowStats
    hour: WindowStats
    day: WindowStats


_EMPTY = WindowStats(0, 0.0)
_NO_TRAFFIC = StatsData(_EMPTY, _EMPTY, _EMPTY)


class _Series:
    """One key's samples for each window: (time, total) pairs, oldest first."""

    __slots__ = ("windows",)

    def __init__(self, now: float, total: int) -> None:
        self.windows = [deque([(now, total)], maxlen=keep) for _, keep in _WINDOWS]

    def add(self, now: float, total: int) -> None:
        for (every, _), samples in zip(_WINDOWS, self.windows):
            if every == SAMPLE_S or now - samples[-1][0] >= every * 0.99:
                samples.append((now, total))

    def data(self, now: float, total: int) -> StatsData:
        figures = []
        for samples in self.windows:
            then, before = samples[0]
            # the newest total counts even before its window's next sample is due
            elapsed = now - then
            count = total - before
            figures.append(WindowStats(count, count / elapsed if elapsed > 0 else 0.0))
        return StatsData(*figures)


class TrafficStats:
    def __init__(self) -> None:
        self._totals: dict[tuple[str, str], int] = {}
        self._series: dict[tuple[str, str], _Series] = {}
        self._now = 0.0
        self._sampled = False

    def sample(self, now: float, totals: Mapping[tuple[str, str], int]) -> None:
        """Every key's running total now, keyed by (stats name, stats key). A key missing
        from ``totals`` is gone (its topic or group was deleted)."""
        last, series = self._totals, self._series
        for key, total in totals.items():
            before = last.get(key)
            if before is None:
                if not self._sampled:
                    continue  # the baseline
                before = 0  # new since the last sample: all of it is new
            if total < before:
                series[key] = _Series(now, total)
                continue
            s = series.get(key)
            if s is None:
                if total == before:
                    continue  # idle since start-up: no samples
                s = series[key] = _Series(self._now, before)
            s.add(now, total)
        for key in [k for k in series if k not in totals]:
            del series[key]
        self._totals = dict(totals)
        self._now = now
        self._sampled = True

    def stats(self, name: str, key: str, total: int, now: float) -> StatsData:
        """One key's windows, ending at its running total ``total`` now (so what came
        since the last sample counts at once); zeros for a key with no traffic since
        start-up."""
        s = self._series.get((name, key))
        if s is not None:
            return s.data(now, max(total, s.windows[0][-1][1]))
        before = self._totals.get((name, key))
        if before is None:  # new since the last sample
            before = 0 if self._sampled else total
        if total <= before:
            return _NO_TRAFFIC
        elapsed = now - self._now
        window = WindowStats(total - before, (total - before) / elapsed if elapsed > 0 else 0.0)
        return StatsData(window, window, window)
