"""Batch and streaming writes: DataFrame rows (as Arrow RecordBatches) to one topic.

Columns: `value` (binary or string, required), `key` (string: the queue is chosen by its
hash, so one key keeps its order), `tags`, `keys` (string or array<string>), `properties`
(map<string,string>), `queue_id` (int: that queue). A Spark task sends its rows as batch
sends, one queue's chunk of up to `CHUNK` rows at a time, and names each chunk with a
deterministic DEDUP_KEY, ``writer/epoch/partition/queue/chunk``: a retried task (or a
replayed micro-batch) resends the same chunks under the same keys, and the broker stores
each key once (core/dedup.py), so consumers never see a repeat. `writer` is a fresh id per
batch write; a streaming write uses the `writerId` option, else its checkpoint location,
so a query restarted from its checkpoint keeps the keys of the batches it replays.
"""

from __future__ import annotations

import asyncio
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from rocketport.client import Message, Producer
from rocketport.client.message import MessageQueue
from rocketport.common.message import PROPERTY_DEDUP_KEY

from .options import OptionError, WriteOptions
from .schema import PROPERTY_KEY

CHUNK = 512  # rows per batch send (one queue, one dedup key)
IN_FLIGHT = 8  # batch sends a task keeps in flight
SEND_TIMEOUT_S = 30.0
WRITABLE = ("value", "key", "tags", "keys", "properties", "queue_id")


@dataclass(frozen=True)
class Written(WriterCommitMessage):
    partition: int
    rows: int


def check_schema(schema: StructType) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise OptionError("writing to rocketport needs a `value` column (binary or string)")
    unknown = sorted(names - set(WRITABLE))
    if unknown:
        raise OptionError(f"columns {unknown} cannot be written; known: {', '.join(WRITABLE)}")


def _messages(topic: str, batch: pa.RecordBatch) -> Iterator[tuple[Message, str | None, int | None]]:
    cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    n = batch.num_rows
    values = cols["value"]
    nothing = [None] * n
    keys_col, tags_col = cols.get("keys", nothing), cols.get("tags", nothing)
    key_col, props_col, queue_col = cols.get("key", nothing), cols.get("properties", nothing), cols.get("queue_id", nothing)
    for i in range(n):
        value = values[i]
        if not value:
            raise ValueError("rocketport rows need a non-empty value")
        body = value.encode() if isinstance(value, str) else value
        props = dict(props_col[i]) if props_col[i] else {}
        key = key_col[i]
        if key is not None:
            props[PROPERTY_KEY] = key
        yield (Message(topic, body, tags=tags_col[i] or None, keys=keys_col[i] or None,
                       properties=props or None), key, queue_col[i])


async def _send_partition(opts: WriteOptions, prefix: str, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row; chunks per queue, keyed `prefix/queue/chunk`."""
    # a generous send timeout: a chunk that times out fails the task, and its retry resends
    # everything (dropped as repeats), so waiting is cheaper than giving up
    async with Producer(opts.namesrv, opts.group, send_timeout_s=SEND_TIMEOUT_S) as producer:
        queues = await producer.runtime.routes.publish_queues(opts.topic)
        by_id = {}
        for mq in queues:
            by_id.setdefault(mq.queue_id, mq)
        pending: dict[MessageQueue, list[Message]] = {}
        chunk_no: dict[MessageQueue, int] = {}
        sends: set[asyncio.Task] = set()
        rows = rr = 0

        async def flush(mq: MessageQueue) -> None:
            msgs = pending.pop(mq, [])
            if not msgs:
                return
            n = chunk_no[mq] = chunk_no.get(mq, -1) + 1
            dedup = f"{prefix}/{mq.broker_name}:{mq.queue_id}/{n}"
            for m in msgs:
                m.properties = {**(m.properties or {}), PROPERTY_DEDUP_KEY: dedup}
            while len(sends) >= IN_FLIGHT:
                done, _ = await asyncio.wait(sends, return_when=asyncio.FIRST_COMPLETED)
                sends.difference_update(done)
                for task in done:
                    task.result()
            sends.add(asyncio.create_task(producer.send_batch(msgs, queue=mq)))

        for batch in batches:
            for msg, key, queue_id in _messages(opts.topic, batch):
                if queue_id is not None:
                    mq = by_id.get(queue_id)
                    if mq is None:
                        raise ValueError(f"topic {opts.topic} has no queue {queue_id}")
                elif key is not None:
                    mq = queues[zlib.crc32(key.encode()) % len(queues)]
                else:
                    mq = queues[rr % len(queues)]
                    rr += 1
                chunk = pending.setdefault(mq, [])
                chunk.append(msg)
                rows += 1
                if len(chunk) >= CHUNK:
                    await flush(mq)
        for mq in list(pending):
            await flush(mq)
        for task in asyncio.as_completed(list(sends)):
            await task
        return rows


def send_partition(opts: WriteOptions, prefix: str, batches: Iterator[pa.RecordBatch]) -> int:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_send_partition(opts, prefix, batches))
    finally:
        loop.close()


def _partition() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(schema)
        self.opts = opts
        self.writer_id = uuid.uuid4().hex  # made on the driver: every task attempt shares it

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        partition = _partition()
        return Written(partition, send_partition(self.opts, f"{self.writer_id}/0/{partition}", iterator))

    def commit(self, messages: list[WriterCommitMessage]) -> None:
        """Nothing to do: every chunk is stored (and deduplicated) when its task ends."""

    def abort(self, messages: list[WriterCommitMessage]) -> None:
        """Chunks of tasks that ended are stored: a topic has no rollback."""


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType, writer_id: str) -> None:
        check_schema(schema)
        self.opts = opts
        self.writer_id = writer_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        ctx = TaskContext.get()
        epoch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        if epoch is None:
            raise RuntimeError("no micro-batch id in the task's properties (streaming.sql.batchId)")
        partition = _partition()
        return Written(partition, send_partition(self.opts, f"{self.writer_id}/{epoch}/{partition}", iterator))

    def commit(self, messages: list[WriterCommitMessage], batchId: int) -> None:
        """Nothing to do: every chunk is stored (and deduplicated) when its task ends."""

    def abort(self, messages: list[WriterCommitMessage], batchId: int) -> None:
        """Chunks sent are stored; the batch's replay resends them under the same keys."""
