"""A push consumer's pull and consume figures per topic, over the last minute (and its
failures over the last hour): what RocketMQ's ConsumerStatsManager keeps for the
ConsumeStatus table of GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus).

Counts go into 10-second buckets, so the cost per pull or listener call is a few
additions and the memory per topic is bounded whatever the rate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

BUCKET_S = 10.0
MINUTE_S = 60.0
HOUR_S = 3600.0


@dataclass(slots=True)
class _Bucket:
    start: float
    pulled: int = 0
    pull_calls: int = 0
    pull_ms: float = 0.0
    ok: int = 0
    failed: int = 0
    consume_calls: int = 0
    consume_ms: float = 0.0


class ConsumeStats:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock  # the consumer's: callers time pulls and listener calls with it
        self._buckets: dict[str, deque[_Bucket]] = {}

    def _bucket(self, topic: str) -> _Bucket:
        now = self.clock()
        buckets = self._buckets.get(topic)
        if buckets is None:
            buckets = self._buckets[topic] = deque(maxlen=int(HOUR_S / BUCKET_S) + 1)
        if not buckets or now - buckets[-1].start >= BUCKET_S:
            buckets.append(_Bucket(now))
        return buckets[-1]

    def pulled(self, topic: str, rt_ms: float, count: int) -> None:
        """A pull answered after ``rt_ms`` with ``count`` messages."""
        b = self._bucket(topic)
        b.pull_calls += 1
        b.pull_ms += rt_ms
        b.pulled += count

    def consumed(self, topic: str, rt_ms: float, ok: int, failed: int) -> None:
        """A listener call of ``rt_ms``: ``ok`` messages consumed, ``failed`` refused."""
        b = self._bucket(topic)
        b.consume_calls += 1
        b.consume_ms += rt_ms
        b.ok += ok
        b.failed += failed

    def status(self, topic: str) -> dict[str, float]:
        """ConsumeStatus: pullRT and consumeRT (ms, average per call) and the TPS over the
        last minute; consumeFailedMsgs over the last hour."""
        now = self.clock()
        buckets = self._buckets.get(topic, ())
        minute = [b for b in buckets if now - b.start < MINUTE_S]
        span = max(now - minute[0].start, 1.0) if minute else 1.0
        pull_calls = sum(b.pull_calls for b in minute)
        consume_calls = sum(b.consume_calls for b in minute)
        return {
            "pullRT": sum(b.pull_ms for b in minute) / pull_calls if pull_calls else 0.0,
            "pullTPS": sum(b.pulled for b in minute) / span,
            "consumeRT": sum(b.consume_ms for b in minute) / consume_calls if consume_calls else 0.0,
            "consumeOKTPS": sum(b.ok for b in minute) / span,
            "consumeFailedTPS": sum(b.failed for b in minute) / span,
            "consumeFailedMsgs": sum(b.failed for b in buckets if now - b.start < HOUR_S),
        }
