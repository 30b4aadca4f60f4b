"""Batch read: one Spark partition per queue range, broker-side filters from the options.

The reader must never narrow what it reads by the filters Spark pushes (`pushFilters`):
Spark 4.1-4.3 keep one read plan (partitions and read function) per DataFrame, set by the
last filter pushdown and reused by every later scan of that DataFrame that pushes nothing,
and by every other scan of it in the same query (a union or self-join of filtered views).
A pushed `tags = 'A'` then silently drops the other rows from the DataFrame's unfiltered
queries. So what is read is fixed by the options alone (`tags`, `sql`, offsets), which are
the DataFrame's own, and Spark evaluates every predicate itself (docs/pipeline.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from .options import LATEST, ReadOptions
from .plan import QueueRange, RangeGroup, group_filtered, read_group, read_range, resolve, split, split_filtered
from .remote import Link


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[QueueRange | RangeGroup]:
        return plan_batch(self.options)

    def read(self, partition: QueueRange | RangeGroup) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, RangeGroup):
            return read_group(partition, self.options.group, self.options.namesrv)
        if not isinstance(partition, QueueRange):
            return iter(())  # nothing planned: Spark reads one placeholder partition
        return read_range(partition, self.options.group, self.options.namesrv)


def plan_batch(opts: ReadOptions) -> list[QueueRange | RangeGroup]:
    """Queue ranges from the offsets specs, with the options' broker-side filter: one
    partition per range (cut by `maxOffsetsPerPartition`), or with a filter, ranges packed
    by the rows they are expected to return (`group_filtered`)."""
    out: list[QueueRange | RangeGroup] = []
    filtered: list[tuple[QueueRange, float]] = []
    with Link(opts.namesrv, opts.group) as link:
        for topic in opts.topics:
            mqs = link.queues(topic)
            if not mqs:
                continue
            mins, maxs = link.min_offsets(mqs), link.max_offsets(mqs)
            starts = resolve(link, opts.starting, mqs, mins=mins, maxs=maxs)
            ends = resolve(link, opts.ending, mqs, mins=mins, maxs=maxs, unnamed=LATEST)
            ranges = [QueueRange(topic, mq.broker_name, link.broker_addr(mq), mq.queue_id,
                                 start, end, opts.tags, opts.sql)
                      for mq, start, end in zip(mqs, starts, ends) if start < end]
            if opts.tags or opts.sql:
                filtered += split_filtered(link, ranges, opts.max_offsets_per_partition)
            else:
                out += [piece for r in ranges for piece in split(r, opts.max_offsets_per_partition)]
    return out + group_filtered(filtered, opts.max_offsets_per_partition)
