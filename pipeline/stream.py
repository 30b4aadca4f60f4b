"""Streaming read: micro-batches of per-queue offset ranges, offsets kept as JSON.

An offset is ``{"topic": {"broker:queueId": next offset}}`` with sorted keys (Spark compares
offsets as JSON text). Spark's checkpoint is the truth: a restarted query resumes from the
end offset of its last committed micro-batch, so it reads each message once into an
idempotent sink. `commit(end)` mirrors the offsets to the consumer group named by `group`
as progress only (so `rocketport admin consumerProgress -g group -t topic` shows the
job's lag); Spark calls it one micro-batch late and not for the last batch of a stopped
query, which is why it is never read back. `maxOffsetsPerTrigger` caps a micro-batch's
offsets, shared across queues in proportion to their backlog; Trigger.AvailableNow reads up
to the offsets of its start. A queue that appears later is read from its earliest offset.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocketport.client.message import MessageQueue

from .options import ReadOptions
from .plan import QueueRange, queue_key, read_range, resolve, split
from .remote import Link

Offsets = dict[str, dict[str, int]]


def _sorted(offsets: Offsets) -> Offsets:
    return {t: dict(sorted(per.items())) for t, per in sorted(offsets.items())}


def _queue(topic: str, key: str) -> MessageQueue:
    broker, _, queue_id = key.rpartition(":")
    return MessageQueue(topic, broker, int(queue_id))


def share(available: dict[tuple[str, str], int], budget: int) -> dict[tuple[str, str], int]:
    """`budget` offsets shared across queues in proportion to what each has available."""
    total = sum(available.values())
    if total <= budget:
        return dict(available)
    taken = {q: n * budget // total for q, n in available.items()}
    left = budget - sum(taken.values())
    for q in sorted(available, key=lambda q: available[q] - taken[q], reverse=True):
        if left <= 0:
            break
        if taken[q] < available[q]:
            taken[q] += 1
            left -= 1
    return taken


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: Offsets | None = None  # Trigger.AvailableNow's end

    def _bounds(self, link: Link) -> tuple[Offsets, Offsets]:
        """(earliest, latest) of every queue of every topic."""
        lows: Offsets = {}
        highs: Offsets = {}
        for topic in self.options.topics:
            mqs = link.queues(topic)
            lows[topic] = {queue_key(mq): o for mq, o in zip(mqs, link.min_offsets(mqs))}
            highs[topic] = {queue_key(mq): o for mq, o in zip(mqs, link.max_offsets(mqs))}
        return lows, highs

    def initialOffset(self) -> Offsets:
        out: Offsets = {}
        with Link(self.options.namesrv, self.options.group) as link:
            for topic in self.options.topics:
                mqs = link.queues(topic)
                mins, maxs = link.min_offsets(mqs), link.max_offsets(mqs)
                starts = resolve(link, self.options.starting, mqs, mins=mins, maxs=maxs)
                out[topic] = {queue_key(mq): s for mq, s in zip(mqs, starts)}
        return _sorted(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with Link(self.options.namesrv, self.options.group) as link:
            self._target = _sorted(self._bounds(link)[1])

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        with Link(self.options.namesrv, self.options.group) as link:
            lows, highs = self._bounds(link)
        if self._target is not None:  # never past the offsets AvailableNow started at
            highs = {t: {k: min(o, self._target.get(t, {}).get(k, lows[t][k])) for k, o in per.items()}
                     for t, per in highs.items()}
        begin = {(t, k): start.get(t, {}).get(k, lows[t][k]) for t, per in highs.items() for k in per}
        available = {q: max(0, highs[q[0]][q[1]] - b) for q, b in begin.items()}
        if isinstance(limit, ReadMaxRows):
            available = share(available, limit.max_rows)
        end: Offsets = {}
        for (t, k), b in begin.items():
            end.setdefault(t, {})[k] = b + available[(t, k)]
        return _sorted(end)

    def partitions(self, start: Offsets, end: Offsets) -> list[QueueRange]:
        tags, sql = self.options.tags, self.options.sql
        out: list[QueueRange] = []
        with Link(self.options.namesrv, self.options.group) as link:
            for topic, per in end.items():
                for mq in link.queues(topic):
                    key = queue_key(mq)
                    if key not in per:
                        continue
                    lo = start.get(topic, {}).get(key, 0)
                    if lo < per[key]:
                        out += split(QueueRange(topic, mq.broker_name, link.broker_addr(mq), mq.queue_id,
                                                lo, per[key], tags, sql),
                                     self.options.max_offsets_per_partition)
        return out

    def read(self, partition: QueueRange) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())
        return read_range(partition, self.options.group, self.options.namesrv)

    def commit(self, end: Offsets) -> None:
        """Mirror `end` to the consumer group as its progress (never read back)."""
        with Link(self.options.namesrv, self.options.group) as link:
            for topic in end:
                link.queues(topic)  # the route: where each queue's broker is
            link.commit_offsets(self.options.group, {
                _queue(t, k): o for t, per in end.items() for k, o in per.items()})
