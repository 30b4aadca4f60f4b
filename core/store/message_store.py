"""DefaultMessageStore: the CommitLog, its ConsumeQueues and index, behind one API.

Puts append to the CommitLog on the event loop (memcpy into the mapping), assign queue
offsets, and dispatch ConsumeQueue entries; a message becomes visible when dispatched —
at once under ASYNC_FLUSH, after the covering fdatasync under SYNC_FLUSH, so a consumer is
never served a message that a crash could take back. Reads return memoryview slices.
Recovery, flushing, checkpoints, index building and retention run as owned tasks.
This module knows nothing of protocols, groups or filters beyond the tags-code prefilter.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import shutil
import struct
import time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from operator import itemgetter
from typing import Callable, Iterator, Protocol

from ..batch.message_batch import ENTRY_HEAD
from ..batch.record_batch import iter_records, parse_header
from ..config import BrokerConfig
from ..message_id import offset_msg_id, offset_msg_id_template
from ..errors import BrokerError, InvalidMessage, MessageTooLarge, StoreUnavailable
from ..message import (
    INNER_BATCH_FLAG,
    PROPERTY_INNER_NUM,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    TAGS_NEEDLES,
    Message,
    MessageExt,
    encode_properties,
    property_bytes,
    property_needles,
)
from ..tags import tags_code, tags_code_of_value
from .checkpoint import Checkpoint, CheckpointFile
from .commitlog import CommitLog, now_ms
from .consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from .dispatch import StoreDispatch, _Dispatch
from .flush import FlushService
from .get_result import GetResult, GetStatus, Segment
from .index_service import IndexService
from .inner_batch import batch_messages
from .record import (
    BATCH_HEADER,
    END_FILE_MIN_BLANK_LENGTH,
    HEADER,
    HEADER_SIZE,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    I32,
    MESSAGE_MAGIC_CODE,
    POS_BODY_LENGTH,
    POS_BORN_TIMESTAMP,
    POS_QUEUE_OFFSET,
    POS_STORE_TIMESTAMP,
    POS_SYS_FLAG,
    PROPS_LEN,
    QUEUE_OFFSET,
    SHARED_FIELDS,
    crc32,
    decode_record,
    ip_bytes,
    topic_and_properties,
)
from .recovery import StoreRecovery
from .segment_preparer import SegmentPreparer

log = logging.getLogger(__name__)

MAX_SCAN_PER_GET = 16_000
QUERY_CATCH_UP = 50_000  # messages a key lookup indexes first, at most  # entries examined per get when a filter skips messages
PREFILTER_CHUNK = 2_048  # ConsumeQueue entries read at once when a filter may skip many


class TagsFilter(Protocol):
    """The part of a subscription filter the store applies (see core.filter.MessageFilter)."""

    @property
    def prefilter_codes(self) -> frozenset[int] | None: ...
    @property
    def needs_exact_check(self) -> bool: ...
    @property
    def raw_matcher(self) -> Callable[[bytes], bool]: ...


@dataclass(slots=True)
class PutResult:
    queue_id: int
    queue_offset: int  # first logical offset written
    commit_log_offset: int
    wrote_bytes: int
    store_timestamp: int
    count: int = 1
    store_host: bytes = b""
    record_offsets: tuple[int, ...] = ()  # per-message commit-log offsets of a record batch

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_ids(self) -> list[str]:
        offsets = self.record_offsets or (self.commit_log_offset,)
        return [offset_msg_id(self.store_host, o) for o in offsets]

    @property
    def joined_msg_ids(self) -> str:
        """`msg_ids` joined by commas, as a batch send's response carries them."""
        template = offset_msg_id_template(self.store_host)
        offsets = self.record_offsets or (self.commit_log_offset,)
        return b",".join([template % o for o in offsets]).decode()



# A message for put_batch: (body, encoded properties, tags code, flag, sys flag, born
# timestamp, born host, reconsume times, prepared transaction offset).
EncodedMessage = tuple[bytes | memoryview, bytes, int, int, int, int, tuple[str, int], int, int]
# A message for append_messages: (topic, queue id, body, encoded properties, tags code,
# flag, sys flag, born timestamp, born host, reconsume times).
EncodedPut = tuple[str, int, bytes | memoryview, bytes, int, int, int, int, tuple[str, int], int]


@lru_cache(maxsize=4096)
def _host_bytes(host: str) -> bytes:
    return ip_bytes(host)


def _batch_records(batch: bytes, start: int, first: int, queue_id: int, shared: bytes,
                   topic_head: bytes) -> tuple[list[bytes], list[bytes], list[int], list[bytes], int]:
    """(record parts, ConsumeQueue entries, commit-log offsets, encoded properties, end
    offset) of a MessageBatch body's entries written from ``start`` with queue offsets from
    ``first``."""
    end = len(batch)
    head = ENTRY_HEAD.size
    grow = HEADER_SIZE + len(topic_head) - head  # a record is this much longer than its entry
    unpack_head, unpack_props_len = ENTRY_HEAD.unpack_from, PROPS_LEN.unpack_from  # i16 in both
    pack, cq_pack = BATCH_HEADER.pack, CQ_ENTRY.pack
    parts: list[bytes] = []
    cq_entries: list[bytes] = []
    offsets: list[int] = []
    properties: list[bytes] = []
    pos = 0
    phys = start
    queue_offset = first
    try:
        while pos < end:
            size, _magic, _crc, flag, body_len = unpack_head(batch, pos)
            props_at = pos + head + body_len
            next_pos = pos + size
            if (body_len < 0 or props_at + 2 > next_pos or next_pos > end
                    or props_at + 2 + unpack_props_len(batch, props_at)[0] != next_pos):
                raise InvalidMessage(f"batch entry at {pos} has inconsistent lengths")
            body = batch[pos + head:props_at]  # bytes, not views: views are tracked by the GC
            record_size = size + grow
            parts += (pack(record_size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id,
                           flag, queue_offset, phys, shared, body_len),
                      body, topic_head, batch[props_at:next_pos])
            props = batch[props_at + 2:next_pos]
            properties.append(props)
            cq_entries.append(cq_pack(phys, record_size,
                                      tags_code_of_value(property_bytes(props, TAGS_NEEDLES))))
            offsets.append(phys)
            phys += record_size
            queue_offset += 1
            pos = next_pos
    except struct.error:  # fewer bytes left than an entry's head
        raise InvalidMessage(f"batch entry at {pos} is truncated") from None
    return parts, cq_entries, offsets, properties, phys


@lru_cache(maxsize=4096)
def _inner_tail(topic: str, count: int) -> bytes:
    """The bytes after an inner batch's body when INNER_NUM is its only property: a
    producer's batches repeat a few sizes, so most puts find theirs here."""
    return _tail(topic, encode_properties({PROPERTY_INNER_NUM: str(count)}))


def _tail(topic: str, props: bytes) -> bytes:
    """topicLength + topic + propertiesLength + properties: the bytes after the body."""
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise InvalidMessage(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes")
    return _topic_head(topic) + PROPS_LEN.pack(len(props)) + props


@lru_cache(maxsize=4096)
def _topic_head(topic: str) -> bytes:
    """topicLength (1 byte) + topic, as it follows the body in a record."""
    data = topic.encode()
    if not data or len(data) > MAX_TOPIC_LENGTH:
        raise InvalidMessage(f"topic must be 1..{MAX_TOPIC_LENGTH} bytes")
    return bytes((len(data),)) + data


class MessageStore(StoreRecovery, StoreDispatch):
    def __init__(self, config: BrokerConfig,
                 tags_code_of: Callable[[str, dict[str, str]], int] | None = None) -> None:
        self.config = config
        self.root = config.store_path_root_dir
        self.cq_root = os.path.join(self.root, "consumequeue")
        self.store_host = _host_bytes(config.broker_ip1) + config.listen_port.to_bytes(4, "big")
        self._store_ip, self._store_port = self.store_host[:4], config.listen_port
        self._preparer = SegmentPreparer()
        self.commitlog = CommitLog(config.commit_log_dir, config.mapped_file_size_commit_log,
                                   warm=config.warm_maped_file_enable, preparer=self._preparer)
        self.checkpoint_file = CheckpointFile(self.root)
        self.index = IndexService(os.path.join(self.root, "index"), config.max_hash_slot_num,
                                  config.max_index_num, enabled=config.message_index_enable)
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._next_queue_offset: dict[tuple[str, int], int] = {}
        self._pending: deque[_Dispatch] = deque()
        self._sync = config.sync_flush
        self.dispatched_offset = 0
        self._verify_from = 0
        self._last_checkpoint_dispatched = 0
        self._tags_code_of = tags_code_of  # None: the TAGS hash (delay topics override)
        self.dispatch_listeners: list[Callable[[str, int, int], None]] = []
        self.flush_service: FlushService | None = None
        self._deleted_topics: set[str] = set()  # no late preparation may recreate their files
        self._running = False
        self.recovered_from_crash = False
        self.recovery_report: dict = {}
        self.put_count = self.put_bytes = self.get_count = self.get_bytes = 0

    # ================================================================ lifecycle
    def open(self) -> None:
        """Load and recover (blocking; called before the loop serves anyone)."""
        os.makedirs(self.root, exist_ok=True)
        self.commitlog.queue.load()
        self._load_consume_queues()
        self.index.load()
        self.recovered_from_crash = self.checkpoint_file.crashed_last_time()
        self._recover(self.checkpoint_file.load())
        self.checkpoint_file.mark_running()

    async def start(self) -> None:
        """Start the owned background services; returns once they run."""
        self._running = True
        self._stop_event = asyncio.Event()
        self.flush_service = FlushService(
            self.commitlog, sync=self._sync, interval_ms=self.config.flush_interval_commit_log,
            on_flushed=self._on_flushed)
        self._services = asyncio.TaskGroup()
        await self._services.__aenter__()
        self._services.create_task(self.flush_service.run(), name="flush-commitlog")
        self._services.create_task(self._run_every(self.config.flush_interval_consume_queue,
                                                   self.flush_queues_and_checkpoint),
                                   name="flush-consumequeue")
        self._services.create_task(self._run_every(self.config.clean_resource_interval,
                                                   self._clean_expired), name="clean-files")
        self._services.create_task(self.index.run(self), name="index-builder")

    async def stop(self) -> None:
        """Stop services, flush everything, write the clean-shutdown checkpoint."""
        if not self._running:
            return
        self._running = False
        self.index.stop()
        self.flush_service.stop()
        self._stop_event.set()
        await self._services.__aexit__(None, None, None)
        await self.flush_queues_and_checkpoint()
        self.checkpoint_file.mark_clean_shutdown()
        self.close()

    def close(self) -> None:
        self._preparer.close()
        self.commitlog.close()
        for cq in self.consume_queues.values():
            cq.close()
        self.index.close()

    async def _run_every(self, interval_ms: int, fn) -> None:
        stop = self._stop_event
        while self._running:
            try:
                await asyncio.wait_for(stop.wait(), interval_ms / 1000)
            except asyncio.TimeoutError:
                pass
            if not self._running:
                return
            try:
                await fn()
            except Exception:  # a background service logs and goes on; it never kills the broker
                log.exception("store service %s failed", getattr(fn, "__name__", fn))

    # ================================================================ put
    def _finish_put(self, topic: str, queue_id: int, queue_offset: int, entries: bytes,
                    count: int, end: int, size: int):
        self._next_queue_offset[(topic, queue_id)] = queue_offset + count
        self.put_count += count
        self.put_bytes += size
        d = _Dispatch(topic, queue_id, queue_offset, entries, end)
        if self._sync:
            self._pending.append(d)
            return self.flush_service.wait_flushed(end)
        self._dispatch(d)
        return None

    def _code_of(self, topic: str, properties: dict[str, str]) -> int:
        if self._tags_code_of is not None:
            return self._tags_code_of(topic, properties)
        return tags_code(properties.get(PROPERTY_TAGS)) if properties else 0

    async def put_message(self, msg: Message) -> PutResult:
        properties = msg.properties
        props = encode_properties(properties) if properties else b""
        code = (self._tags_code_of(msg.topic, properties) if self._tags_code_of
                else tags_code(properties.get(PROPERTY_TAGS)) if properties else 0)
        queue_offset, phys, end, now = self.append_message(
            msg.topic, msg.queue_id, msg.body, props, code, msg.flag, msg.sys_flag,
            msg.born_timestamp, msg.born_host, msg.reconsume_times, msg.prepared_transaction_offset)
        if self._sync:
            await self.flush_service.wait_flushed(end)
        return PutResult(msg.queue_id, queue_offset, phys, end - phys, now, 1, self.store_host)

    def append_message(self, topic: str, queue_id: int, body: bytes | memoryview, props: bytes,
                       code: int, flag: int, sys_flag: int, born_timestamp: int,
                       born_host: tuple[str, int], reconsume_times: int = 0,
                       prepared_transaction_offset: int = 0) -> tuple[int, int, int, int]:
        """Append one record with its properties already encoded; no await, so a front-end
        can answer a send without a coroutine. Returns (queue offset, commit-log offset,
        end offset, store timestamp). Dispatched at once under ASYNC_FLUSH; under
        SYNC_FLUSH the caller must await ``flush_service.wait_flushed(end)`` before
        answering, as the record becomes visible only once flushed."""
        # The hot path, kept flat on purpose: each call or object costs ~0.3 µs here.
        if not self._running:
            raise StoreUnavailable("the store is not running")
        body_len = len(body)
        if body_len > self.config.max_message_size:
            raise MessageTooLarge(body_len, self.config.max_message_size)
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise InvalidMessage(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes")
        topic_head = _topic_head(topic)
        size = HEADER_SIZE + body_len + len(topic_head) + 2 + props_len
        key = (topic, queue_id)
        queue_offset = self._next_queue_offset.get(key, 0)
        now = time.time_ns() // 1_000_000
        cq = self.consume_queues.get(key) or self._consume_queue(topic, queue_id)
        cq.ensure_room(queue_offset, 1)  # a full disk refuses the put before it is written
        mf = self.commitlog.reserve(size)
        pos = mf.wrote_position
        phys = mf.file_from_offset + pos
        mf.view[pos:pos + size] = b"".join((HEADER.pack(
            size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag,
            queue_offset, phys, sys_flag, born_timestamp or now,
            _host_bytes(born_host[0]), born_host[1], now, self._store_ip, self._store_port,
            reconsume_times, prepared_transaction_offset, body_len),
            body, topic_head, PROPS_LEN.pack(props_len), props))
        mf.wrote_position = pos + size
        self._next_queue_offset[key] = queue_offset + 1
        self.put_count += 1
        self.put_bytes += size
        entry = CQ_ENTRY.pack(phys, size, code)
        end = phys + size
        if self._sync:
            self._pending.append(_Dispatch(topic, queue_id, queue_offset, entry, end))
        else:
            cq.put(queue_offset, entry, end)
            self.dispatched_offset = end
            for listener in self.dispatch_listeners:
                listener(topic, queue_id, queue_offset + 1)
        return queue_offset, phys, end, now

    def append_messages(self, items: list[EncodedPut]) -> list[tuple[int, int] | BrokerError]:
        """Append messages of any topics and queues, in order, as contiguous records in
        one write: (queue offset, commit-log offset) per message, or the error that
        refused that message alone. ASYNC_FLUSH only (records are dispatched at once).
        The per-put costs (reserving, writing, dispatching, waking pulls) are paid once
        per call and once per queue, which is what concurrent single sends need."""
        if not self._running:
            raise StoreUnavailable("the store is not running")
        if self._sync:
            raise RuntimeError("append_messages serves ASYNC_FLUSH only")
        # One pass, assuming the records fit the current segment; nothing is written or
        # counted until they do (else one by one, which rolls the segment over).
        mf = self.commitlog.reserve(0)
        start = mf.wrote_position
        phys = base = mf.file_from_offset + start
        max_size = self.config.max_message_size
        now = time.time_ns() // 1_000_000
        store_ip, store_port = self._store_ip, self._store_port
        next_offset = self._next_queue_offset
        out: list[tuple[int, int] | BrokerError] = []
        parts: list[bytes | memoryview] = []
        queues: dict[tuple[str, int], list] = {}  # per queue: [first offset, entries, end]
        last_topic = last_host = topic_head = host = None
        for topic, queue_id, body, props, code, flag, sys_flag, born_ts, born_host, reconsume in items:
            body_len = len(body)
            props_len = len(props)
            if body_len > max_size:
                out.append(MessageTooLarge(body_len, max_size))
                continue
            if props_len > MAX_PROPERTIES_LENGTH:
                out.append(InvalidMessage(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes"))
                continue
            if topic is not last_topic:  # a read's sends mostly share topic and host
                try:
                    topic_head = _topic_head(topic)
                except InvalidMessage as exc:
                    out.append(exc)
                    continue
                last_topic = topic
            if born_host is not last_host:
                host, last_host = _host_bytes(born_host[0]), born_host
            size = HEADER_SIZE + body_len + len(topic_head) + 2 + props_len
            key = (topic, queue_id)
            queue = queues.get(key)
            if queue is None:
                queue_offset = next_offset.get(key, 0)
                queue = queues[key] = [queue_offset, [], 0]
            else:
                queue_offset = queue[0] + len(queue[1])
            parts += (HEADER.pack(
                size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag,
                queue_offset, phys, sys_flag, born_ts or now, host, born_host[1], now,
                store_ip, store_port, reconsume, 0, body_len),
                body, topic_head, PROPS_LEN.pack(props_len), props)
            queue[1].append(CQ_ENTRY.pack(phys, size, code))
            out.append((queue_offset, phys))
            phys += size
            queue[2] = phys
        total = phys - base
        if not total:
            return out
        if start + total + END_FILE_MIN_BLANK_LENGTH > self.commitlog.file_size:
            return [self._append_alone(item) for item in items]  # the segment's end: rare
        for key, (first, entries, _) in queues.items():  # a full disk refuses them here
            (self.consume_queues.get(key) or self._consume_queue(*key)).ensure_room(first, len(entries))
        if start + total + END_FILE_MIN_BLANK_LENGTH > mf.backed:  # reserve(0) backed less
            mf.ensure_backed(start + total + END_FILE_MIN_BLANK_LENGTH)  # DiskFull: nothing written
        mf.view[start:start + total] = b"".join(parts)
        mf.wrote_position = start + total
        self.put_bytes += total
        for key, (first, entries, end) in queues.items():
            next_offset[key] = first + len(entries)
            self.put_count += len(entries)
            cq = self.consume_queues.get(key) or self._consume_queue(*key)
            cq.put(first, b"".join(entries), end)
            for listener in self.dispatch_listeners:
                listener(key[0], key[1], first + len(entries))
        self.dispatched_offset = phys
        return out

    def _append_alone(self, item: EncodedPut) -> tuple[int, int] | BrokerError:
        try:
            return self.append_message(*item)[:2]
        except BrokerError as exc:
            return exc

    @property
    def sync_flush(self) -> bool:
        return self._sync

    async def put_messages(self, msgs: list[Message]) -> PutResult:
        """Store several messages of one topic and queue as contiguous records (one append)."""
        if not msgs:
            raise InvalidMessage("empty batch")
        topic, queue_id = msgs[0].topic, msgs[0].queue_id
        code_of = self._code_of
        entries = []
        for m in msgs:
            if m.topic != topic or m.queue_id != queue_id:
                raise InvalidMessage("a batch must hold one topic and one queue")
            entries.append((m.body, encode_properties(m.properties), code_of(topic, m.properties),
                            m.flag, m.sys_flag, m.born_timestamp, m.born_host, m.reconsume_times,
                            m.prepared_transaction_offset))
        return await self.put_batch(topic, queue_id, entries)

    async def put_batch(self, topic: str, queue_id: int, entries: list[EncodedMessage]) -> PutResult:
        """Store messages whose properties are already encoded as contiguous records of one
        topic and queue, in one append: a remoting batch send copies each message's
        properties from the request without decoding them. The limits are put_message's,
        the size limit applying to the whole batch."""
        if not self._running:
            raise StoreUnavailable("the store is not running")
        if not entries:
            raise InvalidMessage("empty batch")
        topic_head = _topic_head(topic)
        fixed = HEADER_SIZE + len(topic_head) + 2
        props_lengths = list(map(len, map(_SECOND, entries)))  # C-level: no loop per message
        if max(props_lengths) > MAX_PROPERTIES_LENGTH:
            raise InvalidMessage(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes")
        total = fixed * len(entries) + sum(map(len, map(_FIRST, entries))) + sum(props_lengths)
        limit = self.config.max_message_size
        if total > limit:
            raise MessageTooLarge(total, limit)
        first = self._next_queue_offset.get((topic, queue_id), 0)
        now = time.time_ns() // 1_000_000
        store_ip, store_port = self._store_ip, self._store_port
        offsets: list[int] = []
        cq_entries: list[bytes] = []
        parts: list[bytes | memoryview] = []
        self._consume_queue(topic, queue_id).ensure_room(first, len(entries))
        mf = self.commitlog.reserve(total)
        phys = start = mf.file_from_offset + mf.wrote_position
        qo = first
        last_host = host = None
        for body, props, code, flag, sys_flag, born_ts, born_host, reconsume, prepared in entries:
            body_len = len(body)
            size = fixed + body_len + len(props)
            if born_host is not last_host:  # one host for a whole remoting batch
                host, last_host = _host_bytes(born_host[0]), born_host
            parts += (HEADER.pack(
                size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag, qo,
                phys, sys_flag, born_ts or now, host, born_host[1],
                now, store_ip, store_port, reconsume, prepared, body_len),
                body, topic_head, PROPS_LEN.pack(len(props)), props)
            offsets.append(phys)
            cq_entries.append(CQ_ENTRY.pack(phys, size, code))
            phys += size
            qo += 1
        mf.write(b"".join(parts))
        waiter = self._finish_put(topic, queue_id, first, b"".join(cq_entries), len(entries),
                                  start + total, total)
        if waiter is not None:
            await waiter
        return PutResult(queue_id, first, start, total, now, len(entries), self.store_host,
                         tuple(offsets))

    async def put_message_batch(self, topic: str, queue_id: int, batch: bytes, *, sys_flag: int,
                                born_timestamp: int, born_host: tuple[str, int],
                                reconsume_times: int = 0,
                                declines: Callable[[bytes], bool] | None = None) -> PutResult | None:
        """A client's MessageBatch body (`core.batch.message_batch`) stored as one record per
        entry, walked once with no per-message objects: the remoting batch send's hot path.

        Each record is the shared head fields packed once, the entry's body and properties
        sliced from ``batch``, and the topic; its tags code is the TAGS hash (a caller sends
        topics with other rules through `put_messages`). ``declines`` sees every entry's
        properties joined by \\x02 before anything is written: when it answers true, nothing
        is and None is returned (the broker's test for delays and transactions, which go
        through `put_messages`). InvalidMessage when an entry's lengths do not add up, and
        the size limit for the whole batch, both before anything is written.
        """
        if not self._running:
            raise StoreUnavailable("the store is not running")
        if not batch:
            raise InvalidMessage("empty batch")
        limit = self.config.max_message_size
        if len(batch) > limit:
            raise MessageTooLarge(len(batch), limit)
        topic_head = _topic_head(topic)
        first = self._next_queue_offset.get((topic, queue_id), 0)
        now = time.time_ns() // 1_000_000
        shared = SHARED_FIELDS.pack(sys_flag, born_timestamp or now, _host_bytes(born_host[0]),
                                    born_host[1], now, self._store_ip, self._store_port,
                                    reconsume_times, 0)
        start = self.commitlog.max_offset
        while True:  # twice when the batch opens a new segment: its offsets move
            parts, cq_entries, offsets, properties, end = _batch_records(
                batch, start, first, queue_id, shared, topic_head)
            if declines is not None and declines(b"\x02".join(properties)):
                return None
            total = end - start
            if total > limit:
                raise MessageTooLarge(total, limit)
            self._consume_queue(topic, queue_id).ensure_room(first, len(offsets))
            mf = self.commitlog.reserve(total)
            if mf.file_from_offset + mf.wrote_position == start:
                break
            start = mf.file_from_offset + mf.wrote_position
        mf.write(b"".join(parts))
        waiter = self._finish_put(topic, queue_id, first, b"".join(cq_entries), len(offsets),
                                  end, total)
        if waiter is not None:
            await waiter
        return PutResult(queue_id, first, start, total, now, len(offsets), self.store_host,
                         tuple(offsets))

    async def put_inner_batch(self, topic: str, queue_id: int, batch: bytes | memoryview,
                              count: int, *, tags_codes: int | list[int] = 0,
                              properties: dict[str, str] | None = None,
                              born_timestamp: int = 0, born_host: tuple[str, int] = ("127.0.0.1", 0),
                              flag: int = 0, sys_flag: int = 0) -> PutResult:
        """Store a record batch (v2 layout) whole: one CommitLog record, ``count`` offsets.

        The batch's first 8 bytes (its baseOffset) are rewritten to the first logical offset
        it receives, so reads can serve the stored bytes unchanged.
        """
        if not self._running:
            raise StoreUnavailable("the store is not running")
        body_len = len(batch)
        if count <= 0 or body_len < 8:
            raise InvalidMessage("an inner batch needs at least one record")
        if body_len > self.config.max_message_size:
            raise MessageTooLarge(body_len, self.config.max_message_size)
        if not isinstance(tags_codes, int) and len(tags_codes) != count:
            raise InvalidMessage("one tags code per record is needed")
        if properties:
            tail = _tail(topic, encode_properties({**properties, PROPERTY_INNER_NUM: str(count)}))
        else:
            tail = _inner_tail(topic, count)
        size = HEADER_SIZE + body_len + len(tail)
        first = self._next_queue_offset.get((topic, queue_id), 0)
        now = time.time_ns() // 1_000_000
        base = QUEUE_OFFSET.pack(first)
        rest = memoryview(batch)[8:]
        crc = crc32(rest, crc32(base)) & 0x7FFFFFFF
        self._consume_queue(topic, queue_id).ensure_room(first, count)
        # written in parts straight into the mapping: the batch is copied exactly once
        mf = self.commitlog.reserve(size)
        pos = mf.wrote_position
        phys = mf.file_from_offset + pos
        view = mf.view
        body_at = pos + HEADER_SIZE
        view[pos:body_at + 8] = HEADER.pack(
            size, MESSAGE_MAGIC_CODE, crc, queue_id, flag, first, phys,
            sys_flag | INNER_BATCH_FLAG, born_timestamp or now, _host_bytes(born_host[0]),
            born_host[1], now, self._store_ip, self._store_port, 0, 0, body_len) + base
        view[body_at + 8:body_at + body_len] = rest
        view[body_at + body_len:pos + size] = tail
        mf.wrote_position = pos + size
        if isinstance(tags_codes, int):
            entries = CQ_ENTRY.pack(phys, -size, tags_codes) * count
        else:
            entries = b"".join([CQ_ENTRY.pack(phys, -size, c) for c in tags_codes])
        waiter = self._finish_put(topic, queue_id, first, entries, count, phys + size, size)
        if waiter is not None:
            await waiter
        return PutResult(queue_id, first, phys, size, now, count, self.store_host)

    # ================================================================ get
    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queues.get((topic, queue_id))

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int, *,
                     max_bytes: int | None = None,
                     message_filter: TagsFilter | None = None,
                     exact: bool = True) -> GetResult:
        """Messages from ``offset`` as CommitLog slices, filtered by tags code (and exactly,
        when ``exact`` and the filter asks for it), at most ``max_count`` of them."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_off, max_off = cq.min_offset, cq.max_offset
        if max_off == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_off if min_off else 0,
                             min_off, max_off)
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        self._collect(cq, offset, max_count, max_bytes, message_filter, exact, result)
        if result.message_count:
            result.status = GetStatus.FOUND
            self.get_count += result.message_count
            self.get_bytes += result.total_bytes
        elif result.next_begin_offset == offset:
            result.status = GetStatus.OFFSET_FOUND_NULL
        return result

    def _collect(self, cq: ConsumeQueue, offset: int, max_count: int, max_bytes: int | None,
                 flt: TagsFilter | None, exact: bool, result: GetResult) -> None:
        cl = self.commitlog
        cl_min = cl.min_offset
        segments = result.segments
        count = 0
        total = 0
        scanned = 0
        byte_limit = max_bytes if max_bytes is not None else 1 << 62
        if flt is None and self._collect_run(cq, offset, max_count, byte_limit, cl_min, result):
            return
        # the tags-code prefilter and the exact check on the record's properties bytes
        codes = flt.prefilter_codes if flt is not None else None
        matcher = (flt.raw_matcher if exact and flt is not None and flt.needs_exact_check
                   else None)
        filtering = codes is not None or matcher is not None
        run_start = run_end = -1
        run_first = run_count = 0
        batch_phys = -1
        batch_seg = Segment(memoryview(b""), -1, 0)
        next_offset = offset
        max_off = result.max_offset
        while count < max_count and next_offset < max_off and scanned < MAX_SCAN_PER_GET:
            want = PREFILTER_CHUNK if filtering else max_count - count + 64
            chunk = cq.entries(next_offset, min(want, MAX_SCAN_PER_GET - scanned))
            if not chunk:
                break
            base = next_offset
            chunk_end = base + len(chunk) // CQ_ENTRY_SIZE
            entries = (self._matching(chunk, codes, matcher) if filtering
                       else enumerate(_CQ_ENTRY_WORDS.iter_unpack(chunk)))
            stop = False
            resume = -1  # where to go on when the loop leaves a chunk early
            for i, (phys, size, _, _) in entries:  # lazy: a full get stops reading
                qo = base + i
                if phys < cl_min:
                    continue
                if size > 0:
                    if total and total + size > byte_limit:  # the first message always fits
                        stop = True
                        resume = qo
                        break
                    if phys == run_end:
                        run_end += size
                        run_count += 1
                    else:
                        if run_count:
                            segments.append(Segment(cl.slice(run_start, run_end - run_start), run_first, run_count))
                        run_start, run_end, run_first, run_count = phys, phys + size, qo, 1
                    total += size
                else:  # an entry of an inner batch (negative size)
                    if run_count:
                        segments.append(Segment(cl.slice(run_start, run_end - run_start), run_first, run_count))
                        run_count = 0
                        run_end = -1
                    if phys == batch_phys and batch_seg.first_offset + batch_seg.count == qo:
                        batch_seg.count += 1
                    else:
                        if total and total - size > byte_limit:
                            stop = True
                            resume = qo
                            break
                        view = cl.slice(phys, -size)
                        if view is None:
                            continue
                        (batch_base,) = QUEUE_OFFSET.unpack_from(view, POS_QUEUE_OFFSET)
                        batch_seg = Segment(view, qo, 1, batch_base)
                        segments.append(batch_seg)
                        batch_phys = phys
                        total -= size
                        if not filtering:  # take the rest of the batch at once
                            take = min(batch_base + _inner_count(view) - qo, max_count - count)
                            batch_seg.count = take
                            count += take
                            resume = qo + take
                            if count >= max_count or total >= byte_limit:
                                stop = True
                            break  # re-read entries from after the batch
                count += 1
                if count >= max_count or total >= byte_limit:
                    stop = True
                    resume = qo + 1
                    break
            next_offset = chunk_end if resume < 0 else resume
            scanned += next_offset - base
            if stop:
                break
        if run_count:
            segments.append(Segment(cl.slice(run_start, run_end - run_start), run_first, run_count))
        # slices are None only if the log was truncated under us: drop them
        if any(s.view is None for s in segments):
            segments[:] = [s for s in segments if s.view is not None]
            count = sum(s.count for s in segments)
        result.message_count = count
        result.total_bytes = total
        result.next_begin_offset = next_offset

    def _collect_run(self, cq: ConsumeQueue, offset: int, max_count: int, byte_limit: int,
                     cl_min: int, result: GetResult) -> bool:
        """`_collect` for the commonest unfiltered read, a run of plain records that lie
        back to back in the CommitLog (one producer's queue), with no per-entry Python
        loop: the entries are unpacked in one call and checked with C-level map,
        accumulate and bisect. False, having done nothing, for anything else."""
        count = min(max_count, result.max_offset - offset)
        if not 1 < count <= MAX_RUN:
            return False
        chunk = cq.entries(offset, count)
        count = len(chunk) // CQ_ENTRY_SIZE
        if count < 2 or _CQ_ENTRY_WORDS.unpack_from(chunk)[1] <= 0:  # an inner batch's entry
            return False
        words = _cq_run(count).unpack(chunk)
        sizes = words[1::3]
        first = words[0]
        total = sum(sizes)
        # Records never overlap and a queue's lie in log order, so they are back to back
        # exactly when the last starts where the others' sizes end.
        if (first < cl_min or min(sizes) <= 0  # trimmed, or an inner batch's entries
                or words[-3] - first != total - sizes[-1]):  # others' records between
            return False
        if total > byte_limit:  # as many as fit; the first always does
            totals = list(accumulate(sizes))
            count = max(1, bisect_right(totals, byte_limit))
            total = totals[count - 1]
        view = self.commitlog.slice(first, total)
        if view is None:
            return False
        result.segments.append(Segment(view, offset, count))
        result.message_count = count
        result.total_bytes = total
        result.next_begin_offset = offset + count
        return True

    def _matching(self, chunk: memoryview, codes: frozenset[int] | None,
                  matcher: Callable[[bytes], bool] | None
                  ) -> Iterator[tuple[int, tuple[int, int, int, int]]]:
        """(index, entry) of the entries of a ConsumeQueue chunk that pass a filter.

        The scan's hot loop, kept tight: tags codes are searched for in the chunk's bytes
        (`_code_hits`), and only for a candidate is its record looked at, in place: the
        properties are found from the fixed header in the mapped segment and handed to the
        filter as bytes. Nothing is built for an entry that fails. Inner-batch entries
        (negative size) pass the exact check: their reader filters per record
        (core.store.inner_batch).
        """
        if codes is None:
            entries = enumerate(_CQ_ENTRY_WORDS.iter_unpack(chunk))
        else:
            unpack = _CQ_ENTRY_WORDS.unpack_from
            entries = ((i, unpack(chunk, i * CQ_ENTRY_SIZE)) for i in _code_hits(chunk, codes))
        if matcher is None:
            yield from entries
            return
        find = self.commitlog.queue.find
        body_length = I32.unpack_from
        mm = view = None
        base = end = 0  # the segment in use: [base, end) is written
        for i, entry in entries:
            phys, size, _, _ = entry
            if size > 0:
                if phys < base or phys + size > end:
                    mf = find(phys)
                    if mf is None:
                        continue
                    mm, view, base = mf.mm, mf.view, mf.file_from_offset
                    end = base + mf.wrote_position
                    if phys < base or phys + size > end:
                        continue
                pos = phys - base
                at = pos + HEADER_SIZE + body_length(view, pos + POS_BODY_LENGTH)[0]
                # topicLength u8 + topic + propertiesLength i16, then properties to the end
                if not matcher(mm[at + 3 + view[at]:pos + size]):
                    continue
            yield i, entry

    # ================================================================ lookups
    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Visible max offset (next offset a consumer will see)."""
        cq = self.consume_queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def store_timestamp_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self.consume_queues.get((topic, queue_id))
        entry = cq.entry(offset) if cq else None
        if entry is None or entry[0] < self.commitlog.min_offset:
            return None
        view = self.commitlog.slice(entry[0], abs(entry[1]))
        return QUEUE_OFFSET.unpack_from(view, POS_STORE_TIMESTAMP)[0] if view is not None else None

    def offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first offset whose message was stored at or after ``timestamp`` (ms);
        max offset if none was."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self.store_timestamp_at(topic, queue_id, mid)
            if ts is None or ts < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def offset_by_record_timestamp(self, topic: str, queue_id: int, timestamp: int) -> tuple[int, int]:
        """Kafka's ListOffsets by time: the first offset whose record timestamp (a Kafka
        record's own, another message's born time) is at or after ``timestamp``, with that
        timestamp; (max offset, -1) when there is none.

        Searches on each entry's newest timestamp (a stored batch's maxTimestamp), so it
        assumes timestamps grow along the queue, as Kafka's time index does; inside the
        batch found, the records are read to find the first one at or after ``timestamp``.
        """
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0, -1
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            found = self._newest_timestamp(cq, mid)
            if found is None or found[0] < timestamp:
                lo = mid + 1
            else:
                hi = mid
        found = self._newest_timestamp(cq, lo) if lo < cq.max_offset else None
        if found is None:
            return lo, -1
        newest, batch = found
        if batch is None:
            return lo, newest
        header = parse_header(batch)  # its baseOffset is the batch's first queue offset
        for index, record in enumerate(iter_records(batch)):
            if header.base_timestamp + record.timestamp_delta >= timestamp:
                return header.base_offset + index, header.base_timestamp + record.timestamp_delta
        return lo, newest

    def _newest_timestamp(self, cq: ConsumeQueue, offset: int) -> tuple[int, memoryview | None] | None:
        """(newest timestamp, the stored batch or None) of the entry at ``offset``."""
        entry = cq.entry(offset)
        view = self.commitlog.slice(entry[0], abs(entry[1])) if entry else None
        if view is None:
            return None
        born = QUEUE_OFFSET.unpack_from(view, POS_BORN_TIMESTAMP)[0]
        if not I32.unpack_from(view, POS_SYS_FLAG)[0] & INNER_BATCH_FLAG:
            return born, None
        batch = view[HEADER_SIZE:HEADER_SIZE + I32.unpack_from(view, POS_BODY_LENGTH)[0]]
        return parse_header(batch).max_timestamp, batch

    def message_at(self, commit_log_offset: int) -> MessageExt | None:
        rec = self.commitlog.record_at(commit_log_offset)
        return decode_record(rec) if rec is not None else None

    def query_by_key(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                     end: int | None = None) -> list[MessageExt]:
        end = end if end is not None else now_ms() + 1000
        self.index.build(self, QUERY_CATCH_UP)  # bounded: a lookup never stalls the loop long
        found: list[MessageExt] = []
        for phys in dict.fromkeys(self.index.lookup(f"{topic}#{key}", max_num * 4, begin, end)):
            for msg in self._messages_at(phys):
                if msg.topic == topic and (key in msg.keys or msg.uniq_key == key
                                           or msg.properties.get(PROPERTY_KEYS) == key):
                    found.append(msg)
            if len(found) >= max_num:
                break
        return found[:max_num]

    def _messages_at(self, phys: int) -> list[MessageExt]:
        """The message at ``phys``, or every message of the inner batch stored there."""
        rec = self.commitlog.record_at(phys)
        if rec is None:
            return []
        msg = decode_record(rec)
        if not msg.sys_flag & INNER_BATCH_FLAG:
            return [msg]
        try:
            return list(batch_messages(rec, self.config.kafka_tag_header))
        except ValueError:
            return []

    # ================================================================ admin
    def prepare_queues(self, topic: str, queue_nums: int) -> None:
        """Have the first ConsumeQueue file of each of ``topic``'s new queues made in the
        background (see segment_preparer): a new topic's first messages then do not each
        pay a fresh file's first write on the event loop."""
        if not self._running:
            return
        self._deleted_topics.discard(topic)
        for queue_id in range(queue_nums):
            if (topic, queue_id) not in self.consume_queues:
                # not registered (a queue in the checkpoint must have files): only its layout
                # is used, and deleting the topic is what cancels the preparation
                ConsumeQueue(self.cq_root, topic, queue_id, self.config.mapped_file_size_consume_queue,
                             self._preparer).prepare_next(
                    lambda: self._running and topic not in self._deleted_topics)

    async def queues_prepared(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout``) for the files prepare_queues has asked for so far."""
        await asyncio.wait({asyncio.wrap_future(self._preparer.barrier())}, timeout=timeout)

    def delete_topic(self, topic: str) -> None:
        self._deleted_topics.add(topic)
        for key in [k for k in self.consume_queues if k[0] == topic]:
            self.consume_queues.pop(key).destroy()
            self._next_queue_offset.pop(key, None)
        shutil.rmtree(os.path.join(self.cq_root, topic), ignore_errors=True)

    def truncate_queue_min(self, topic: str, queue_id: int, offset: int) -> int:
        """Raise a queue's min offset (Kafka DeleteRecords); returns the new min."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        cq.min_logic_offset = max(cq.min_logic_offset, min(offset, cq.max_offset))
        return cq.min_offset

    # ================================================================ flush / checkpoint
    async def flush_queues_and_checkpoint(self) -> None:
        flushed = self.flush_service.flushed_offset if self.flush_service else self.commitlog.max_offset
        dispatched = min(self.dispatched_offset, flushed)
        index_offset = min(self.index.built_offset, flushed)
        queues = {k: cq.max_offset for k, cq in self.consume_queues.items()}
        dirty = [mf for cq in self.consume_queues.values() for mf in cq.queue.files
                 if mf.flushed_position < mf.wrote_position]
        positions = [mf.wrote_position for mf in dirty]
        index_files = self.index.dirty_files()
        if dispatched - self._verify_from > self.config.recover_check_window:
            self._verify_from = self._last_checkpoint_dispatched
        cp = Checkpoint(flushed, dispatched, index_offset, self._verify_from, now_ms(), queues)

        def work() -> None:
            for mf in dirty:
                mf.sync()
            for f in index_files:
                f.sync()
            self.checkpoint_file.save(cp)

        await asyncio.to_thread(work)
        for mf, pos in zip(dirty, positions):
            mf.flushed_position = max(mf.flushed_position, pos)
        self._last_checkpoint_dispatched = dispatched

    # ================================================================ retention
    async def _clean_expired(self) -> None:
        self.delete_expired_files(force=False)

    def disk_usage_ratio(self) -> float:
        usage = shutil.disk_usage(self.root)
        return usage.used / usage.total if usage.total else 0.0

    def delete_expired_files(self, *, force: bool, now: float | None = None) -> int:
        """RocketMQ's CleanCommitLogService: delete CommitLog segments older than
        fileReservedTime at deleteWhen hours (or at once when the disk is above
        diskMaxUsedSpaceRatio), then the ConsumeQueue and index files they orphan."""
        now = time.time() if now is None else now
        hours = {int(h) for h in self.config.delete_when.split(";")}
        disk_full = self.disk_usage_ratio() * 100 > self.config.disk_max_used_space_ratio
        if not (force or disk_full or time.localtime(now).tm_hour in hours):
            return 0
        reserved_s = self.config.file_reserved_time * 3600
        files = self.commitlog.queue.files
        n = 0
        for mf in files[:-1]:
            if n >= 10:
                break
            age = now - os.path.getmtime(mf.path)
            if age >= reserved_s or (disk_full and n == 0):
                n += 1
            else:
                break
        if n:
            gone = self.commitlog.queue.delete_first(n)
            log.info("deleted %d expired commit log segments up to %d", n, gone[-1].end_offset)
            cl_min = self.commitlog.min_offset
            for cq in self.consume_queues.values():
                cq.delete_expired(cl_min)
            self.index.delete_before(cl_min)
        return n


# a ConsumeQueue entry with its tagsCode as two words: the low one, signed, is the Java
# int RocketMQ compares (tagsCode.intValue()), so a tag prefilter is one set look-up
_CQ_ENTRY_WORDS = struct.Struct(">qiii")
_CODE_AT = CQ_ENTRY_SIZE - 4  # where that low word sits in an entry
MAX_RUN = 1024  # entries `_collect_run` unpacks at once; longer reads take the loop
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


@lru_cache(maxsize=32)
def _cq_run(count: int) -> struct.Struct:
    """The layout of ``count`` ConsumeQueue entries (a few counts recur: 32, 256...)."""
    return struct.Struct(">" + "qiq" * count)


def _code_hits(chunk: memoryview, codes: frozenset[int]) -> Iterator[int]:
    """Indexes, ascending, of the entries of a chunk whose tagsCode's low word is in ``codes``.

    The low words are searched for in the bytes (C speed) rather than unpacking every
    entry: a tag filter typically rejects most of a queue. Lazy, as a get often stops early.
    """
    data = bytes(chunk)
    needles = _code_needles(codes)
    if len(needles) == 1:
        return _needle_hits(data, needles[0])
    return heapq.merge(*(_needle_hits(data, needle) for needle in needles))


def _needle_hits(data: bytes, needle: bytes) -> Iterator[int]:
    at = data.find(needle, _CODE_AT)
    while at >= 0:
        if at % CQ_ENTRY_SIZE == _CODE_AT:
            yield at // CQ_ENTRY_SIZE
        at = data.find(needle, at + 1)


_INNER_NUM_NEEDLES = property_needles(PROPERTY_INNER_NUM)


@lru_cache(maxsize=1024)
def _code_needles(codes: frozenset[int]) -> tuple[bytes, ...]:
    return tuple(I32.pack(code) for code in codes)


def _inner_count(record: memoryview) -> int:
    """INNER_NUM of an inner-batch record, read without decoding the other properties."""
    value = property_bytes(topic_and_properties(record)[2], _INNER_NUM_NEEDLES)
    return int(value) if value else 1