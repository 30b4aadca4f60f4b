"""Batch and streaming writes: DataFrame rows (as Arrow RecordBatches) to one topic.

Columns: `value` (binary or string, required), `key` (string: the queue is chosen by its
hash, so one key keeps its order), `tags`, `keys` (string or array<string>), `properties`
(map<string,string>), `queue_id` (int: that queue). Rows without a key or queue go to the
queues in turn, a chunk each. A Spark task sends its rows one queue's chunk of up to
`CHUNK` rows at a time, each chunk one record batch the broker stores whole as one
CommitLog record (an inner batch: every row stays its own message, with its own offset,
for every reader; `entries.py`), and names each chunk with a deterministic
DEDUP_KEY, ``writer/epoch/partition/queue/chunk``: a retried task (or a replayed
micro-batch) resends the same chunks under the same keys, and the broker stores each key
once (core/dedup.py), so consumers never see a repeat. Which rows make which chunk, and
each chunk's number, follow from the task's rows in order alone (never from how Spark
cut them into RecordBatches). `writer` is a fresh id per batch write; a streaming write
uses the `writerId` option, else its checkpoint location, so a query restarted from its
checkpoint keeps the keys of the batches it replays.

The rows never become Python objects: each run of rows is encoded to records from its
Arrow columns at once (`entries.py`), and `IN_FLIGHT` sends are kept in flight.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from rocketport.client import Producer
from rocketport.client.message import MessageQueue
from rocketport.common.message_id import MessageClientIdGenerator

from .entries import encode_records, id_headers, record_batch, row_fields
from .options import OptionError, WriteOptions

CHUNK = 512  # rows per record batch (one queue, one dedup key, one CommitLog record)
RUN = 8 * CHUNK  # rows encoded at once
IN_FLIGHT = 8  # batch sends a task keeps in flight
SEND_TIMEOUT_S = 30.0
WRITABLE = ("value", "key", "tags", "keys", "properties", "queue_id")
_ROUND_ROBIN = -1  # the stream of rows with neither key nor queue
_EMPTY = pa.scalar(b"", pa.binary())


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


@dataclass(slots=True)
class _Chunk:
    """One batch send being filled: its queue, its DEDUP_KEY and its encoded entries."""

    mq: MessageQueue
    key: str
    rows: int = 0
    parts: list[memoryview] = field(default_factory=list)


def targets(batch: pa.RecordBatch, queues: list[MessageQueue]) -> np.ndarray | None:
    """Per row, the index in `queues` its `queue_id` (first) or `key` names, or
    `_ROUND_ROBIN`; None when no row names one."""
    names = batch.schema.names
    if "queue_id" not in names and "key" not in names:
        return None
    out = np.full(batch.num_rows, _ROUND_ROBIN, np.int64)
    if "key" in names:
        key = batch.column("key")
        given = pc.is_valid(key).to_numpy(zero_copy_only=False)
        if given.any():  # each distinct key hashed once
            distinct = pc.dictionary_encode(key.filter(pa.array(given)).cast(pa.binary()))
            count = len(queues)
            hashed = np.array([zlib.crc32(k) % count for k in distinct.dictionary.to_pylist()], np.int64)
            out[given] = hashed[distinct.indices.to_numpy(zero_copy_only=False)]
    if "queue_id" in names:
        column = batch.column("queue_id")
        given = pc.is_valid(column).to_numpy(zero_copy_only=False)
        if given.any():
            ids = column.filter(pa.array(given)).to_numpy()
            index = {}
            for i, mq in enumerate(queues):
                index.setdefault(mq.queue_id, i)
            wanted = np.unique(ids)
            for queue_id in wanted.tolist():
                if queue_id not in index:
                    raise ValueError(f"topic {queues[0].topic} has no queue {queue_id}")
            out[given] = np.array([index[q] for q in wanted.tolist()])[np.searchsorted(wanted, ids)]
    return None if (out == _ROUND_ROBIN).all() else out


class PartitionSender:
    """A Spark task's rows, fed batch by batch, sent as keyed chunks (see the module)."""

    def __init__(self, producer: Producer, topic: str, prefix: str, queues: list[MessageQueue]) -> None:
        self.producer, self.topic, self.prefix, self.queues = producer, topic, prefix, queues
        self.ids = MessageClientIdGenerator(producer.runtime.ip)
        self.open: dict[int, _Chunk] = {}  # stream (queue index or _ROUND_ROBIN) -> its chunk
        self.numbers: dict[MessageQueue, int] = {}
        self.turn = 0  # round-robin chunks opened
        self.sends: set[asyncio.Task] = set()
        self.rows = 0

    async def add(self, batch: pa.RecordBatch) -> None:
        """Encode `batch`'s rows into their chunks; send the chunks they fill."""
        n = batch.num_rows
        if n == 0:
            return
        where = targets(batch, self.queues)
        if where is None:
            streams = {_ROUND_ROBIN: np.arange(n)}
        else:
            order = np.argsort(where, kind="stable")
            cuts = np.flatnonzero(np.diff(where[order])) + 1
            streams = {int(where[rows[0]]): rows for rows in np.split(order, cuts)}
        fresh = self._open_chunks(streams)
        for stream, rows in streams.items():
            part = batch if len(rows) == n else batch.take(pa.array(rows))
            await self._encode(stream, part, fresh[stream])
        self.rows += n

    def _open_chunks(self, streams: dict[int, np.ndarray]) -> dict[int, list[_Chunk]]:
        """The chunks the batch's rows open, per stream, numbered in the order of the rows
        that open them (so the numbers never depend on where batches were cut)."""
        events: list[tuple[np.ndarray, np.ndarray]] = []
        for stream, rows in streams.items():
            held = self.open[stream].rows if stream in self.open else 0
            starts = np.arange((CHUNK - held) % CHUNK, len(rows), CHUNK)
            events.append((rows[starts], np.full(len(starts), stream)))
        rows_at = np.concatenate([e[0] for e in events])
        stream_of = np.concatenate([e[1] for e in events])
        fresh: dict[int, list[_Chunk]] = {stream: [] for stream in streams}
        for stream in stream_of[np.argsort(rows_at)].tolist():
            if stream == _ROUND_ROBIN:
                mq = self.queues[self.turn % len(self.queues)]
                self.turn += 1
            else:
                mq = self.queues[stream]
            number = self.numbers[mq] = self.numbers.get(mq, -1) + 1
            fresh[stream].append(_Chunk(mq, f"{self.prefix}/{mq.broker_name}:{mq.queue_id}/{number}"))
        return fresh

    async def _encode(self, stream: int, rows: pa.RecordBatch, fresh: list[_Chunk]) -> None:
        held = self.open.pop(stream, None)
        chunks = ([held] if held is not None else []) + fresh
        first = held.rows if held is not None else 0
        for lo in range(0, rows.num_rows, RUN):
            run = rows.slice(lo, RUN)
            count = run.num_rows
            at = first + lo + np.arange(count)  # each row's place in its stream
            chunk_of = at // CHUNK
            j0 = int(chunk_of[0])
            head, counter = self.ids.next_id_run(count)
            record_key, headers, counts = row_fields(run)
            ids = id_headers(head, counter, count)
            headers = ids if headers is None else pc.binary_join_element_wise(headers, ids, _EMPTY)
            data, ends = encode_records(run.column("value"), at % CHUNK, record_key, headers, counts + 1)
            view = memoryview(data)
            bounds = np.searchsorted(chunk_of, np.arange(j0, int(chunk_of[-1]) + 2))
            for j in range(j0, int(chunk_of[-1]) + 1):
                a, b = int(bounds[j - j0]), int(bounds[j - j0 + 1])
                chunk = chunks[j]
                chunk.parts.append(view[int(ends[a - 1]) if a else 0:int(ends[b - 1])])
                chunk.rows += b - a
                if chunk.rows == CHUNK:
                    await self._send(chunk)
        if chunks[-1].rows < CHUNK:
            self.open[stream] = chunks[-1]

    async def _send(self, chunk: _Chunk) -> None:
        while len(self.sends) >= IN_FLIGHT:
            done, _ = await asyncio.wait(self.sends, return_when=asyncio.FIRST_COMPLETED)
            self.sends.difference_update(done)
            for task in done:
                task.result()
        body = record_batch(chunk.parts, chunk.rows, int(time.time() * 1000))
        chunk.parts = []
        self.sends.add(asyncio.create_task(
            self.producer.send_inner_batch(self.topic, body, queue=chunk.mq, dedup_key=chunk.key)))

    async def finish(self) -> int:
        """Send the chunks still open, wait for every send; the rows sent."""
        for stream in sorted(self.open):
            await self._send(self.open.pop(stream))
        for task in asyncio.as_completed(list(self.sends)):
            await task
        self.sends.clear()
        return self.rows


async def _send_partition(opts: WriteOptions, prefix: str, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row; chunks per queue, keyed `prefix/queue/chunk`."""
    # a generous send timeout: a chunk that times out fails the task, and its retry resends
    # everything (dropped as repeats), so waiting is cheaper than giving up
    async with Producer(opts.namesrv, opts.group, send_timeout_s=SEND_TIMEOUT_S) as producer:
        queues = await producer.runtime.routes.publish_queues(opts.topic)
        sender = PartitionSender(producer, opts.topic, prefix, list(queues))
        for batch in batches:
            await sender.add(batch)
        return await sender.finish()


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
