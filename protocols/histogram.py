"""Histograms cheap enough for the hot path: a fixed tuple of bucket bounds and a list of
counts, one `bisect` and two additions an observation (a batch of messages is one
observation at its average size). /metrics exports them as Prometheus histograms; nothing
records them unless the HTTP listener is on (`Traffic.sizes` and `Traffic.latency` stay None).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

# RocketMQ 5's buckets: rocketmq_message_size in bytes (1 KiB .. 4 MiB), rocketmq_rpc_latency
# in milliseconds (1 ms .. 3 s)
SIZE_BUCKETS: Final = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2048 * 1024.0, 4096 * 1024.0)
LATENCY_BUCKETS_MS: Final = (1.0, 3.0, 5.0, 10.0, 100.0, 1000.0, 3000.0)
MAX_CODES: Final = 256  # request codes with a histogram of their own; the rest share OTHER
OTHER: Final = -1


class Histogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: over every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def observe_batch(self, total: float, count: int) -> None:
        """``count`` observations adding up to ``total``, counted at their average."""
        self.counts[bisect_left(self.bounds, total / count)] += count
        self.total += total

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), +Inf last: Prometheus' buckets."""
        out, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            out.append((bound, running))
        return out


class Latencies:
    """Request latency in milliseconds by request code (Kafka api key, remoting request code,
    AMQP method name, STOMP command)."""

    __slots__ = ("by_code",)

    def __init__(self) -> None:
        self.by_code: dict[int | str, Histogram] = {}

    def observe(self, code: int | str, ms: float, count: int = 1) -> None:
        """``count`` requests of ``code`` answered in ``ms`` each."""
        histogram = self.by_code.get(code)
        if histogram is None:
            histogram = self._new(code)
        histogram.counts[bisect_left(histogram.bounds, ms)] += count
        histogram.total += ms * count

    def _new(self, code: int | str) -> Histogram:
        if len(self.by_code) >= MAX_CODES:  # a client naming codes at will: one shared histogram
            code = OTHER
            if code in self.by_code:
                return self.by_code[code]
        histogram = self.by_code[code] = Histogram(LATENCY_BUCKETS_MS)
        return histogram
