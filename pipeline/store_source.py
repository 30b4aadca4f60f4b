"""The `rocketport-store` source: a store directory's CommitLog read with no broker running.

For audits, backfills and recovery: ``spark.read.format("rocketport-store").load(dir)``
plans one partition per CommitLog segment (``{dir}/commitlog/<20-digit offset>``, or the
directory of segments itself) and each worker walks its segment record by record with the
core's own decoder (`rocketport.core.store.record`, inner batches through
`rocketport.core.store.inner_batch`), read-only. Rows have the `rocketport` schema. It
reads the log as written: messages under the topic they were stored in (a delayed message
under SCHEDULE_TOPIC_XXXX until due, a half message under RMQ_SYS_TRANS_HALF_TOPIC, Kafka
transaction markers and aborted batches included), up to the first position that holds no
record. The `topic` option skips other topics' records before their bodies are decoded;
Spark's own predicates are never pushed here (see `batch.py` for why a Python source must
not narrow its read by them).
"""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rocketport.common.message import COMPRESSED_FLAG, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from rocketport.common.message_id import encode_offset_msg_id
from rocketport.core.store.inner_batch import batch_messages
from rocketport.core.store.record import (
    MESSAGE_MAGIC_CODE,
    SIZE_MAGIC,
    decode_record,
    is_inner_batch,
    topic_and_properties,
)

from .options import OptionError
from .plan import ROWS_PER_BATCH
from .schema import DDL, RowBuffer


@dataclass(frozen=True)
class Segment(InputPartition):
    path: str
    topics: tuple[str, ...] | None


def segments(path: str) -> list[str]:
    """The CommitLog segment files of a store directory (or of its commitlog directory)."""
    directory = os.path.join(path, "commitlog") if os.path.isdir(os.path.join(path, "commitlog")) else path
    try:
        names = sorted(n for n in os.listdir(directory) if n.isdigit() and len(n) == 20)
    except OSError as exc:
        raise OptionError(f"path: cannot list the store's CommitLog: {exc}") from None
    if not names:
        raise OptionError(f"path: no CommitLog segment in {directory}")
    return [os.path.join(directory, n) for n in names]


def read_segment(seg: Segment) -> Iterator[pa.RecordBatch]:
    wanted = {t.encode() for t in seg.topics} if seg.topics is not None else None
    rows = RowBuffer()
    with open(seg.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = memoryview(mm)
            try:
                pos = 0
                while pos + SIZE_MAGIC.size <= size:
                    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
                    if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > size:
                        break  # a BLANK filler, or the end of what was written
                    if wanted is not None:
                        start, end, _ = topic_and_properties(buf, pos)
                        if bytes(buf[start:end]) not in wanted:
                            pos += total
                            continue
                    _add(rows, buf[pos:pos + total])
                    if len(rows) >= ROWS_PER_BATCH:
                        yield rows.take()
                    pos += total
            finally:
                buf.release()
    if len(rows):
        yield rows.take()


def _add(rows: RowBuffer, record: memoryview) -> None:
    m = decode_record(record)
    if is_inner_batch(m.sys_flag):
        for i, inner in enumerate(batch_messages(bytes(record))):
            _add_message(rows, inner, m.queue_offset + i)
    else:
        _add_message(rows, m, m.queue_offset)


def _add_message(rows: RowBuffer, m, offset: int) -> None:
    host, port = m.store_host
    msg_id = (m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
              or encode_offset_msg_id(host, port, m.commit_log_offset))
    body = zlib.decompress(m.body) if m.sys_flag & COMPRESSED_FLAG else m.body  # as clients do
    rows.add(m.topic, m.queue_id, offset, body, dict(m.properties), m.born_timestamp,
             m.store_timestamp, msg_id, m.reconsume_times)


class StoreReader(DataSourceReader):
    def __init__(self, path: str, topics: tuple[str, ...] | None) -> None:
        self.path = path
        self.topics = topics

    def partitions(self) -> list[Segment]:
        return [Segment(p, self.topics) for p in segments(self.path)]

    def read(self, partition: Segment) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, Segment):
            return iter(())
        return read_segment(partition)


class RocketportStoreDataSource(DataSource):
    """``spark.read.format("rocketport-store").load("/path/to/store")``"""

    @classmethod
    def name(cls) -> str:
        return "rocketport-store"

    def schema(self) -> str:
        return DDL

    def reader(self, schema: StructType) -> StoreReader:
        path = self.options.get("path")
        if not path:
            raise OptionError("path (the store directory) is required: .load(path)")
        topic = self.options.get("topic")
        topics = tuple(t.strip() for t in topic.split(",") if t.strip()) if topic else None
        return StoreReader(path, topics)
