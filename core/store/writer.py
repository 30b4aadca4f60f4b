"""Writer: every put path, from a front-end's message to CommitLog bytes and queue offsets.

`StoreWriter` is one of the classes `MessageStore` (core/store/message_store.py) is made of;
its methods are plain methods of the store (no delegation on the hot paths). The put paths:

    put_message        one decoded message, one record
    append_sends       plain sends of any queues, each one body or a run of bodies that share
                       their properties, one write (ASYNC_FLUSH or answered after `durable`):
                       every front-end's plain-send lane, through `Broker.put_plain`
    put_messages       decoded messages of one queue, as contiguous records (via put_batch)
    put_batch          encoded messages of one queue, as contiguous records
    put_message_batch  a remoting MessageBatch body walked once, one record per entry
    put_inner_batch    a Kafka record batch stored whole: one record, ``count`` offsets
    put_control_batch  a transaction's marker into each of its queues, one write

Every record's 88-byte fixed header has one layout, `record.HEADER` (its field order is the
docs/store-format.md table), packed in five places: `record_head` below, the one encoder
of it, for the paths that write one record per call (put_message, put_inner_batch,
put_control_batch), where a Python call costs nothing measurable; the per-message loops of
put_batch and of append_sends' single sends, which pack the same precompiled `HEADER` with
the same argument order inline; and append_sends' runs and put_message_batch, which pack
the same layout cut in two (`record.BATCH_HEADER` around `record.SHARED_FIELDS`, the fields
a run's or a batch's messages share, packed once). A function call per message in those
loops costs 10-20% of a 100-byte put; packing a single send as a run of one, 5-10%.
tests/core/store/test_put_parity.py stores the same messages through every path and holds
their bytes to `record.encode_record`; a change to the header changes `record.HEADER` and
these five places together.

A put checks its limits and reserves room (ConsumeQueue first, so a full disk refuses it
before anything is written), then writes, then assigns queue offsets and dispatches
(core/store/dispatch.py; under SYNC_FLUSH with dispatchAfterFlush, after the covering
fsync). Under SYNC_FLUSH a put is answered after the covering fsync either way. This
module never reads for a consumer, never makes a record visible before its dispatch, and never awaits
between reserving room and writing it (another put would take the same bytes).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from operator import itemgetter
from time import monotonic as _monotonic
from typing import Callable

from rocketport.common.batch.message_batch import ENTRY_HEAD
from rocketport.common.message import (
    INNER_BATCH_FLAG,
    PROPERTY_INNER_NUM,
    PROPERTY_TAGS,
    TAGS_NEEDLES,
    Message,
    encode_properties,
    property_bytes,
)
from rocketport.common.message_id import offset_msg_id, offset_msg_id_template
from rocketport.common.tags import tags_code, tags_code_of_value

from ..errors import BrokerError, InvalidMessage, MessageTooLarge, NotMaster, StoreUnavailable
from .consume_queue import CQ_ENTRY
from .dispatch import StoreDispatch, _Dispatch
from .index_service import names_index_keys
from .record import (
    BATCH_HEADER,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_SIZE,
    HEADER,
    HEADER_SIZE,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    QUEUE_OFFSET,
    SHARED_FIELDS,
    crc32,
    ip_bytes,
)

_FIRST, _SECOND = itemgetter(0), itemgetter(1)
_pack_header = HEADER.pack
_EPOCH = struct.Struct(">i")  # a record batch's partitionLeaderEpoch


def record_head(size: int, crc: int, queue_id: int, flag: int, queue_offset: int, phys: int,
                sys_flag: int, born_timestamp: int, born_ip: bytes, born_port: int,
                store_timestamp: int, store_ip: bytes, store_port: int, reconsume_times: int,
                prepared_transaction_offset: int, body_len: int) -> bytes:
    """A record's fixed header (`record.HEADER`, 88 bytes, the magic code in place);
    ``crc`` is the body's CRC32 & 0x7FFFFFFF as stored."""
    return _pack_header(size, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, phys,
                        sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip,
                        store_port, reconsume_times, prepared_transaction_offset, body_len)


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


@dataclass(slots=True)
class PlainSend:
    """Plain sends of one topic and queue that share their encoded properties and born
    fields: one remoting send (one body), or a run of alike STOMP frames or AMQP publishes
    (many). ``tags_code`` None: not accepted yet (`Broker.put_plain` accepts it); set, with
    ``queue_id``, from `Broker.accept_now`. No delay, transaction or inner-batch flag: what
    the core must rewrite never takes this shape."""

    topic: str
    queue_id: int  # -1: any (round robin), until accepted
    properties: bytes  # encoded, stored as given
    bodies: list[bytes | memoryview]
    born_host: tuple[str, int]
    tags_code: int | None = None
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0  # 0: the store timestamp
    reconsume_times: int = 0


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
    tagged = TAGS_NEEDLES[1] in batch  # no entry names TAGS (most batches): no lookups
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
                                      tags_code_of_value(property_bytes(props, TAGS_NEEDLES))
                                      if tagged else 0))
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


class StoreWriter(StoreDispatch):
    """The put paths (the store's state: see MessageStore.__init__)."""

    def _finish_put(self, topic: str, queue_id: int, queue_offset: int, entries: bytes,
                    count: int, end: int, size: int, *, wait: bool = True):
        """Offsets, counts and dispatch of a put; under SYNC_FLUSH the future of the fsync
        that covers it (``wait``: a put nobody waits for starts no sync)."""
        self._next_queue_offset[(topic, queue_id)] = queue_offset + count
        self.put_count += count
        self.put_bytes += size
        d = _Dispatch(topic, queue_id, queue_offset, entries, end)
        if self._defer:
            self._pending.append(d)
        else:
            self._dispatch(d)
        if not (self._sync and wait):
            return None
        assert self.flush_service is not None  # a put runs only while the store does
        return self.flush_service.wait_flushed(end)

    async def put_message(self, msg: Message) -> PutResult:
        """Store one decoded message as one record; dispatched at once (under SYNC_FLUSH
        with dispatchAfterFlush, once flushed) and, under SYNC_FLUSH, answered after the
        covering fsync."""
        # Every single put that is not a plain send (delays, transactions, system topics,
        # SYNC_FLUSH remoting sends) comes here: kept flat, each call costs ~0.3 µs.
        if not self._writable or _monotonic() > self.write_deadline:
            raise self._refusal()
        topic, queue_id, body, properties = msg.topic, msg.queue_id, msg.body, msg.properties
        body_len = len(body)
        if body_len > self.max_body:
            raise MessageTooLarge(body_len, self.max_body)
        props = encode_properties(properties) if properties else b""
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise InvalidMessage(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes")
        code = (self._tags_code_of(topic, properties) if self._tags_code_of
                else tags_code(properties.get(PROPERTY_TAGS)) if properties else 0)
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
        born_host = msg.born_host
        mf.view[pos:pos + size] = b"".join((record_head(
            size, crc32(body) & 0x7FFFFFFF, queue_id, msg.flag,
            queue_offset, phys, msg.sys_flag, msg.born_timestamp or now,
            _host_bytes(born_host[0]), born_host[1], now, self._store_ip, self._store_port,
            msg.reconsume_times, msg.prepared_transaction_offset, body_len),
            body, topic_head, PROPS_LEN.pack(props_len), props))
        mf.wrote_position = pos + size
        self._next_queue_offset[key] = queue_offset + 1
        self.put_count += 1
        self.put_bytes += size
        entry = CQ_ENTRY.pack(phys, size, code)
        end = phys + size
        if self._defer:
            self._pending.append(_Dispatch(topic, queue_id, queue_offset, entry, end))
        else:
            cq.put(queue_offset, entry, end)
            self.dispatched_offset = end
            for listener in self.dispatch_listeners:
                listener(topic, queue_id, queue_offset + 1)
        if self._sync:
            assert self.flush_service is not None  # a put runs only while the store does
            await self.flush_service.wait_flushed(end)
        return PutResult(queue_id, queue_offset, phys, size, now, 1, self.store_host)

    def append_sends(self, sends: list[PlainSend]) -> list[tuple[int, int] | BrokerError]:
        """Append plain sends of any topics and queues, in order, as contiguous records in
        one write: per send, the (queue offset, commit-log offset) of its first body, or
        the error that refused that send (all its bodies) alone. What a send's bodies share
        (the head fields from the sys flag on, the topic and properties after the body) is
        packed once per send. Records are dispatched at once; under SYNC_FLUSH the caller
        answers only after `durable` (refused with dispatchAfterFlush). The per-put costs
        (reserving, writing, dispatching, waking pulls) are paid once per call and once per
        queue, which is what concurrent single sends and a publisher's runs need."""
        # The hot path of every front-end's plain sends, kept flat on purpose.
        if not self._writable or _monotonic() > self.write_deadline:
            raise self._refusal()
        if self._defer:
            raise RuntimeError("append_sends dispatches at once: not with dispatchAfterFlush")
        # One pass, assuming the records fit the current segment; nothing is written or
        # counted until they do (else send by send, which rolls the segment over).
        mf = self.commitlog.reserve(0)
        start = mf.wrote_position
        phys = base = mf.file_from_offset + start
        max_size = self.max_body
        now = time.time_ns() // 1_000_000
        store_ip, store_port = self._store_ip, self._store_port
        next_offset = self._next_queue_offset
        pack, pack_shared, cq_pack = BATCH_HEADER.pack, SHARED_FIELDS.pack, CQ_ENTRY.pack
        pack_header = _pack_header
        out: list[tuple[int, int] | BrokerError] = []
        parts: list[bytes | memoryview] = []
        queues: dict[tuple[str, int], list] = {}  # per queue: [first offset, entries, end]
        last_topic: str | None = None
        last_host: tuple[str, int] | None = None
        topic_head = host = b""
        for send in sends:
            topic, queue_id, props, born_host = send.topic, send.queue_id, send.properties, send.born_host
            if len(props) > MAX_PROPERTIES_LENGTH:
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
            key = (topic, queue_id)
            queue = queues.get(key)
            if queue is None:
                queue = queues[key] = [next_offset.get(key, 0), [], 0]
            entries = queue[1]
            queue_offset = first = queue[0] + len(entries)
            bodies = send.bodies
            if len(bodies) == 1:  # a single send (remoting's): its head packed whole, no tail made
                body = bodies[0]
                body_len = len(body)
                if body_len > max_size:
                    out.append(MessageTooLarge(body_len, max_size))
                    continue
                props_len = len(props)
                size = HEADER_SIZE + body_len + len(topic_head) + 2 + props_len
                parts += (pack_header(  # record_head's fields, inline: see the module docstring
                    size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, send.flag,
                    queue_offset, phys, send.sys_flag, send.born_timestamp or now, host, born_host[1],
                    now, store_ip, store_port, send.reconsume_times, 0, body_len),
                    body, topic_head, PROPS_LEN.pack(props_len), props)
                entries.append(cq_pack(phys, size, send.tags_code))
                out.append((queue_offset, phys))
                phys += size
                queue[2] = phys
                continue
            first_phys = phys
            tail = topic_head + PROPS_LEN.pack(len(props)) + props
            fixed = HEADER_SIZE + len(tail)
            shared = pack_shared(send.sys_flag, send.born_timestamp or now, host, born_host[1], now,
                                 store_ip, store_port, send.reconsume_times, 0)
            flag, code = send.flag, send.tags_code
            body_len = 0
            for body in bodies:
                body_len = len(body)
                if body_len > max_size:
                    break
                size = fixed + body_len
                parts += (pack(size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag,
                               queue_offset, phys, shared, body_len), body, tail)
                entries.append(cq_pack(phys, size, code))
                phys += size
                queue_offset += 1
            else:
                if queue_offset > first:
                    queue[2] = phys
                    out.append((first, first_phys))
                    continue
            # refused as a whole: a body too large (or none); what it packed is dropped
            done = queue_offset - first
            if done:
                del parts[-3 * done:], entries[-done:]
            phys = first_phys
            out.append(MessageTooLarge(body_len, max_size) if body_len else InvalidMessage("a send without a body"))
        total = phys - base
        if not total:
            return out
        if start + total + END_FILE_MIN_BLANK_LENGTH > self.commitlog.file_size:
            return [self._append_apart(send) for send in sends]  # the segment's end: rare
        for key, (first, entries, _) in queues.items():  # a full disk refuses them here
            if entries:
                (self.consume_queues.get(key) or self._consume_queue(*key)).ensure_room(first, len(entries))
        if start + total + END_FILE_MIN_BLANK_LENGTH > mf.backed:  # reserve(0) backed less
            mf.ensure_backed(start + total + END_FILE_MIN_BLANK_LENGTH)  # DiskFull: nothing written
        mf.view[start:start + total] = b"".join(parts)
        mf.wrote_position = start + total
        self.put_bytes += total
        records = 0
        for key, (first, entries, end) in queues.items():
            if not entries:
                continue
            count = len(entries)
            records += count
            next_offset[key] = first + count
            self.put_count += count
            cq = self.consume_queues.get(key) or self._consume_queue(*key)
            cq.put(first, b"".join(entries), end)
            for listener in self.dispatch_listeners:
                listener(key[0], key[1], first + count)
        self.dispatched_offset = phys
        # a read's runs of alike AMQP publishes come as several sends: none naming a key,
        # the index steps over all their records (one check of them all: no needle holds
        # the \x02 between two sends' properties, so none is found across two)
        if not names_index_keys(b"\x02".join([send.properties for send in sends])):
            self.index.keyless(base, phys, records)
        return out

    def _append_apart(self, send: PlainSend) -> tuple[int, int] | BrokerError:
        """One send at a segment's end: the segment rolled over first; a run longer than a
        segment halved (rare, and only in small test stores)."""
        bodies = send.bodies
        size = (sum(map(len, bodies))
                + len(bodies) * (FIXED_SIZE + len(send.topic.encode()) + len(send.properties)))
        try:
            if size + END_FILE_MIN_BLANK_LENGTH > self.commitlog.file_size and len(bodies) > 1:
                half = len(bodies) // 2
                first = self._append_apart(replace(send, bodies=bodies[:half]))
                rest = self._append_apart(replace(send, bodies=bodies[half:]))
                return first if isinstance(rest, tuple) else rest
            self.commitlog.reserve(size)
        except BrokerError as exc:
            return exc
        return self.append_sends([send])[0]

    def _refusal(self) -> StoreUnavailable:
        """Why a put is refused: a slave (NotMaster), a master past its write deadline
        (fenced: its election lease may have expired) or a store that is not running."""
        if self._running and (self.slave or _monotonic() > self.write_deadline):
            return NotMaster(self.config.broker_name)
        return StoreUnavailable("the store is not running")

    @property
    def sync_flush(self) -> bool:
        return self._sync

    @property
    def defers_dispatch(self) -> bool:
        """SYNC_FLUSH with dispatchAfterFlush: records become visible only once synced."""
        return self._defer

    def durable(self):
        """SYNC_FLUSH: a future resolved once everything written so far is on disk (a put
        made without waiting, by append_sends, is answered after it).
        None under ASYNC_FLUSH."""
        return self.flush_service.wait_flushed(self.commitlog.max_offset) if self._sync else None

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

    async def put_batch(self, topic: str, queue_id: int, entries: Sequence[EncodedMessage]) -> PutResult:
        """Store messages whose properties are already encoded as contiguous records of one
        topic and queue, in one append: a remoting batch send copies each message's
        properties from the request without decoding them. The limits are put_message's,
        the size limit applying to the whole batch."""
        if not self._writable or _monotonic() > self.write_deadline:
            raise self._refusal()
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
        pack_header = _pack_header
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
            parts += (pack_header(  # record_head's fields, inline: see the module docstring
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
                                declines: Callable[[list[bytes]], bool] | None = None) -> PutResult | None:
        """A client's MessageBatch body (`core.batch.message_batch`) stored as one record per
        entry, walked once with no per-message objects: the remoting batch send's hot path.

        Each record is the shared head fields packed once, the entry's body and properties
        sliced from ``batch``, and the topic; its tags code is the TAGS hash (a caller sends
        topics with other rules through `put_messages`). ``declines`` sees every entry's
        encoded properties before anything is written: when it answers true, nothing is
        and None is returned (the broker's test for delays, transactions and dedup keys).
        InvalidMessage when an entry's lengths do not add up, and the size limit for the
        whole batch, both before anything is written.
        """
        if not self._writable or _monotonic() > self.write_deadline:
            raise self._refusal()
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
            if declines is not None and declines(properties):
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
        self.index.sends(start, end, topic_head[1:], now, offsets, properties)  # indexed in bulk
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
                              flag: int = 0, sys_flag: int = 0, unique_ids: list[bytes] | None = None) -> PutResult:
        """Store a record batch (v2 layout) whole: one CommitLog record, ``count`` offsets.
        ``unique_ids``: the records' UNIQ_KEYs when they are their only keys
        (messages.unique_ids_only), handed to the index builder so it need not read them.

        The batch's first 8 bytes (its baseOffset) are rewritten to the first logical offset
        it receives, and under an election its partitionLeaderEpoch (bytes 12-16, outside the
        batch CRC) to the election's epoch (``leader_epoch``, KIP-101: what a Kafka consumer
        asks OffsetForLeaderEpoch about after a failover), so reads serve the stored bytes unchanged.
        """
        if not self._writable or _monotonic() > self.write_deadline:
            raise self._refusal()
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
        if self.leader_epoch >= 0 and body_len >= 16:  # partitionLeaderEpoch, as a Kafka leader stamps it
            base += bytes(batch[8:12]) + _EPOCH.pack(self.leader_epoch)
        rest = memoryview(batch)[len(base):]
        crc = crc32(rest, crc32(base)) & 0x7FFFFFFF
        self._consume_queue(topic, queue_id).ensure_room(first, count)
        # written in parts straight into the mapping: the batch is copied exactly once
        mf = self.commitlog.reserve(size)
        pos = mf.wrote_position
        phys = mf.file_from_offset + pos
        view = mf.view
        body_at = pos + HEADER_SIZE
        view[pos:body_at + len(base)] = record_head(
            size, crc, queue_id, flag, first, phys,
            sys_flag | INNER_BATCH_FLAG, born_timestamp or now, _host_bytes(born_host[0]),
            born_host[1], now, self._store_ip, self._store_port, 0, 0, body_len) + base
        view[body_at + len(base):body_at + body_len] = rest
        view[body_at + body_len:pos + size] = tail
        mf.wrote_position = pos + size
        for listener in self.batch_listeners:  # state derived from stored batches (core/txn)
            listener(topic, queue_id, first, batch)
        if isinstance(tags_codes, int):
            entries = CQ_ENTRY.pack(phys, -size, tags_codes) * count
        else:
            entries = b"".join([CQ_ENTRY.pack(phys, -size, c) for c in tags_codes])
        if unique_ids is not None:
            self.index.inner_ids(phys, phys + size, topic.encode(), unique_ids)
        waiter = self._finish_put(topic, queue_id, first, entries, count, phys + size, size)
        if waiter is not None:
            await waiter
        return PutResult(queue_id, first, phys, size, now, count, self.store_host)

    async def put_control_batch(self, queues: list[tuple[str, int]], batch: bytes | memoryview,
                                born_timestamp: int) -> list[int]:
        """Store one record batch (a transaction's marker: one control record) in each of
        ``queues`` (distinct), as put_inner_batch would, with one reservation and one write:
        a transaction ends in every queue it wrote at once. Returns the offset each got."""
        if not self._writable or _monotonic() > self.write_deadline:
            raise self._refusal()
        body_len = len(batch)
        if body_len < 8:
            raise InvalidMessage("an inner batch needs at least one record")
        rest = memoryview(batch)[8:]
        firsts, tails, total = [], [], 0
        for topic, queue_id in queues:  # room first: a full disk refuses them all unwritten
            first = self._next_queue_offset.get((topic, queue_id), 0)
            self._consume_queue(topic, queue_id).ensure_room(first, 1)
            tail = _inner_tail(topic, 1)
            firsts.append(first)
            tails.append(tail)
            total += HEADER_SIZE + body_len + len(tail)
        now = time.time_ns() // 1_000_000
        mf = self.commitlog.reserve(total)
        phys = mf.file_from_offset + mf.wrote_position
        born_ip = _host_bytes("127.0.0.1")
        parts: list[bytes | memoryview] = []
        ends = []
        for (_, queue_id), first, tail in zip(queues, firsts, tails):
            size = HEADER_SIZE + body_len + len(tail)
            base = QUEUE_OFFSET.pack(first)
            parts += (record_head(size, crc32(rest, crc32(base)) & 0x7FFFFFFF, queue_id, 0, first, phys,
                                  INNER_BATCH_FLAG, born_timestamp or now, born_ip, 0, now, self._store_ip,
                                  self._store_port, 0, 0, body_len), base, rest, tail)
            phys += size
            ends.append((phys, size))
        mf.write(b"".join(parts))
        for listener in self.batch_listeners:
            for (topic, queue_id), first in zip(queues, firsts):
                listener(topic, queue_id, first, batch)
        waiter = None
        last = len(queues) - 1
        for i, ((topic, queue_id), first, (end, size)) in enumerate(zip(queues, firsts, ends)):
            waiter = self._finish_put(topic, queue_id, first, CQ_ENTRY.pack(end - size, -size, 0), 1, end, size,
                                      wait=i == last)
        if waiter is not None:  # the last one's flush covers them all
            await waiter
        return firsts
