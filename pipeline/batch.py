"""Batch read: one Spark partition per queue range, filters pushed into the broker."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter

from .options import LATEST, ReadOptions
from .plan import QueueRange, read_range, resolve, split, split_filtered
from .pushdown import Pushed
from .remote import Link


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.pushed = Pushed()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for f in filters:
            if not self.pushed.take(f):
                yield f

    def partitions(self) -> list[QueueRange]:
        return plan_batch(self.options, self.pushed)

    def read(self, partition: QueueRange) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())  # nothing planned: Spark reads one placeholder partition
        return read_range(partition, self.options.group, self.options.namesrv)


def plan_batch(opts: ReadOptions, pushed: Pushed) -> list[QueueRange]:
    """Queue ranges from the offsets specs, pruned and narrowed by the pushed filters."""
    tags, sql, possible = pushed.broker_filter(opts.tags, opts.sql)
    if not possible:
        return []
    out: list[QueueRange] = []
    with Link(opts.namesrv, opts.group) as link:
        for topic in opts.topics:
            if pushed.topics is not None and topic not in pushed.topics:
                continue
            mqs = [mq for mq in link.queues(topic) if pushed.allows_queue(mq.queue_id)]
            if not mqs:
                continue
            mins, maxs = link.min_offsets(mqs), link.max_offsets(mqs)
            starts = resolve(link, opts.starting, mqs, mins=mins, maxs=maxs)
            ends = resolve(link, opts.ending, mqs, mins=mins, maxs=maxs, unnamed=LATEST)
            if pushed.store_lo_ms is not None:
                starts = [max(s, o) for s, o in zip(starts, link.offsets_by_time(mqs, pushed.store_lo_ms))]
            if pushed.store_hi_ms is not None:
                ends = [min(e, o) for e, o in zip(ends, link.offsets_by_time(mqs, pushed.store_hi_ms))]
            for mq, start, end in zip(mqs, starts, ends):
                start = max(start, pushed.offset_lo)
                if pushed.offset_hi is not None:
                    end = min(end, pushed.offset_hi)
                if start < end:
                    r = QueueRange(topic, mq.broker_name, link.broker_addr(mq), mq.queue_id, start, end, tags, sql)
                    out += (split_filtered(link, r, opts.max_offsets_per_partition) if tags or sql
                            else split(r, opts.max_offsets_per_partition))
    return out
