"""Fetch: stored record batches back to consumers, with max-wait / min-bytes long polling.

Kafka-produced batches are served as the exact bytes stored (the CommitLog record's body,
a memoryview into the mapped file: no copy, no re-encode), whole: a consumer skips the
records before its fetch offset itself, as with Kafka. Messages that entered through
another protocol are plain CommitLog records; each contiguous run of them is encoded once
as a record batch (see docs/protocol-kafka.md for the mapping) and kept in a small LRU
cache, since consumers of one group and retried fetches ask for the same runs again.

When less than ``min_bytes`` is available the request waits on the facade's
``wait_for_messages`` on all requested partitions at once, up to ``max_wait_ms``; it never polls on
a timer. Isolation level 0 (read_uncommitted) reads everything, transaction markers included;
level 1 (read_committed) reads below the core's last stable offset and gets the aborted
transactions overlapping what it returns, whose batches the client drops itself (KIP-98; the
read rule is the core's, core/txn/visibility.py). A read_committed fetch held at the LSO waits
for the queue's next message (the marker that ends the transaction is one).
This module never touches sockets.

Sizes follow Kafka's rule (KIP-74): a response never carries more than ``max_bytes`` in all
nor more than a partition's ``partition_max_bytes`` for it, counted in the batch bytes sent,
except that the first batch of the first partition with data is always sent whole, so a
consumer makes progress past a batch larger than its limits.

Pacing (`FetchPacer`): librdkafka stops fetching a partition for ``fetch.queue.backoff.ms``
(default 1 s) whenever its local queue holds ``queued.min.messages`` (default 100,000, for
the whole consumer queue), so a broker that delivers faster than the application consumes
makes its consumer idle most of each second. Such a stall shows on the wire: a partition
whose last response left data behind is not fetched again for half a second or more. From
then on the connection's responses are paced to a delivery rate below the one that filled the
client (records per second: 70% of it at each stall, then raised by 25% a second while the
client takes all it is given, and by 3% a second once at 80% of the rate that filled it). A
client that never stalls like that (tuned backoffs, other clients) is never paced.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

from rocketport.common.batch import Record, build_batch
from rocketport.common.field_table import with_header_texts
from rocketport.common.message import (
    PROPERTY_INNER_NUM,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import (
    HEADER_SIZE,
    I32,
    POS_BODY_LENGTH,
    GetStatus,
    Isolation,
    Segment,
    decode_record,
)

from ..frontend import Traffic
from .error_map import error_code_for
from .errors import ErrorCode
from .requests import epoch_error

_MAX_COUNT: Final = 1 << 20  # the byte limits bound a fetch; this only satisfies the API
_CACHE_ENTRIES: Final = 4096
_CACHE_BYTES: Final = 64 << 20
# properties that describe storage, not the message: never shown to Kafka consumers (an
# AMQP typed header table's headers are headers of their own, as text: `with_header_texts`)
_HIDDEN: Final = frozenset({PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_INNER_NUM, PROPERTY_WAIT_STORE_MSG_OK})
_OUT_OF_RANGE: Final = frozenset({GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY})
# pacing: a partition left with data behind and fetched again this long after is a stall
# (librdkafka's queue backoff is 1 s by default; a longer gap is some other pause)
_STALL_MIN_S: Final = 0.5
_STALL_MAX_S: Final = 5.0
_PACE_DECREASE: Final = 0.7  # the new rate, as a share of the rate that filled the client
_PACE_GROWTH: Final = 0.25  # per second, while the pace holds responses back ...
_PACE_NEAR: Final = 0.8  # ... until the rate is this share of the one that filled the client,
_PACE_GROWTH_NEAR: Final = 0.03  # then per second (a stall costs the client a whole second)
_PACE_MIN: Final = 1000.0  # records per second
_PACE_MAX_DELAY_S: Final = 1.0
_PACERS: Final = 1024  # connections remembered (least recently fetching first out)
_PACER_IDLE_S: Final = 30.0  # a connection quiet this long starts afresh (its address may be reused)


class PlainRecordEncoder:
    """Record batches for runs of plain (non-Kafka) messages, encoded once and cached."""

    def __init__(self, tag_header: str) -> None:
        self.tag_header = tag_header
        self._cache: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()
        self._bytes = 0

    def encode(self, topic: str, queue_id: int, seg: Segment) -> bytes:
        key = (topic, queue_id, seg.first_offset, seg.count)
        batch = self._cache.get(key)
        if batch is not None:
            self._cache.move_to_end(key)
            return batch
        batch = self._build(seg)
        self._cache[key] = batch
        self._bytes += len(batch)
        while len(self._cache) > _CACHE_ENTRIES or self._bytes > _CACHE_BYTES:
            _, old = self._cache.popitem(last=False)
            self._bytes -= len(old)
        return batch

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._cache if k[0] == topic]:
            self._bytes -= len(self._cache.pop(key))

    def _build(self, seg: Segment) -> bytes:
        view, pos = seg.view, 0
        records: list[Record] = []
        base_ts = 0
        for i in range(seg.count):
            msg = decode_record(view, pos)
            pos += msg.store_size
            if i == 0:
                base_ts = msg.born_timestamp
            props = with_header_texts(msg.properties)
            keys = props.get(PROPERTY_KEYS)
            headers = [(name, value.encode("utf-8", "surrogateescape"))
                       for name, value in props.items() if name not in _HIDDEN]
            tags = props.get(PROPERTY_TAGS)
            if tags is not None:
                headers.append((self.tag_header, tags.encode("utf-8", "surrogateescape")))
            records.append(Record(i, msg.born_timestamp - base_ts,
                                  keys.encode("utf-8", "surrogateescape") if keys else None,
                                  msg.body, headers))
        return build_batch(records, base_offset=seg.first_offset, base_timestamp=base_ts)


class FetchPacer:
    """One connection's delivery pace, set only once its client has been seen to stall.

    ``rate`` is records per second (None: not paced). A response carrying n records holds
    the connection's next response back until n / rate seconds after it. The rate that
    filled the client is measured over the burst that led to a stall, from the first
    response after the previous stall (or the first ever) to the last one before it: the
    records of every response but the last, over that time (under a pace, each gap follows
    from the response before it).
    """

    __slots__ = ("rate", "filled", "next_at", "grown_at", "burst_at", "burst_records", "last_records",
                 "marks", "used_at")

    def __init__(self) -> None:
        self.used_at = 0.0
        self.rate: float | None = None
        self.filled = 0.0  # the rate that filled the client at its last stall
        self.next_at = 0.0
        self.grown_at = 0.0
        self.burst_at: float | None = None
        self.burst_records = 0
        self.last_records = 0
        # (topic, partition) -> (next offset, when answered), for partitions whose last
        # response left data behind: a client that does not come back for it has stalled
        self.marks: dict[tuple[str, int], tuple[int, float]] = {}

    def hold(self, body: dict[str, Any], now: float) -> float:
        """Seconds to hold this request before reading: notes a stall, then applies the pace."""
        stalled_at = -1.0
        for topic_req in body["topics"]:
            topic = topic_req["topic"]
            for p in topic_req["partitions"]:
                mark = self.marks.pop((topic, p["partition"]), None)
                if mark is not None and mark[0] == p["fetch_offset"] \
                        and _STALL_MIN_S <= now - mark[1] <= _STALL_MAX_S:
                    stalled_at = max(stalled_at, mark[1])
        if stalled_at >= 0:
            self._stalled(stalled_at, now)
        if self.rate is None or self.next_at <= now:
            return 0.0
        # the pace holds this client back while it takes all it is given: let the rate grow,
        # slowly once near the rate that filled it
        growth = _PACE_GROWTH if self.rate < _PACE_NEAR * self.filled else _PACE_GROWTH_NEAR
        self.rate *= 1 + growth * min(now - self.grown_at, 1.0)
        self.grown_at = now
        return min(self.next_at - now, _PACE_MAX_DELAY_S)

    def _stalled(self, stalled_at: float, now: float) -> None:
        filled = None
        if self.burst_at is not None and self.burst_records > self.last_records:
            filled = (self.burst_records - self.last_records) / max(stalled_at - self.burst_at, 1e-3)
        if self.rate is not None:
            filled = self.rate if filled is None else min(filled, self.rate)
        if filled is not None:
            self.rate = max(_PACE_MIN, _PACE_DECREASE * filled)
            self.filled = filled
        self.burst_at = None
        self.burst_records = self.last_records = 0
        self.grown_at = now

    def answered(self, now: float, records: int, left_behind: list[tuple[str, int, int]]) -> None:
        """A response carrying ``records`` went out; ``left_behind``: (topic, partition, next
        offset) of the partitions with more data than it carried."""
        if records:
            if self.burst_at is None:
                self.burst_at = now
            self.burst_records += records
            self.last_records = records
            if self.rate is not None:
                self.next_at = now + records / self.rate
        for topic, partition, next_offset in left_behind:
            self.marks[(topic, partition)] = (next_offset, now)


class FetchHandler:
    def __init__(self, broker: Broker, encoder: PlainRecordEncoder) -> None:
        self.broker = broker
        self.encoder = encoder
        self.traffic = Traffic()  # the front-end's, once it has one (/metrics)
        self._pacers: OrderedDict[Hashable, FetchPacer] = OrderedDict()

    def pacer(self, connection: Hashable, now: float) -> FetchPacer:
        """The connection's pacer (kept by its peer address: the session does not say when a
        connection closes, so an address quiet for _PACER_IDLE_S starts afresh)."""
        pacer = self._pacers.get(connection)
        if pacer is None or now - pacer.used_at > _PACER_IDLE_S:
            pacer = self._pacers[connection] = FetchPacer()
            if len(self._pacers) > _PACERS:
                self._pacers.popitem(last=False)
        self._pacers.move_to_end(connection)
        pacer.used_at = now
        return pacer

    async def handle(self, body: dict[str, Any], may_read: Callable[[str], bool] | None = None,
                     connection: Hashable | None = None, known: Mapping[tuple[str, int], Any] | None = None
                     ) -> dict[str, Any]:
        """``may_read`` (SASL) says whether the client may fetch from a topic; ``connection``
        identifies the client's connection for pacing (None: not paced); ``known`` is an
        incremental fetch session's view (per partition: the ``high_watermark`` and
        ``log_start`` it last answered): a caught-up partition showing the same is left out of
        the answer, as the session would drop it, but still waited on."""
        min_bytes = body["min_bytes"]
        max_wait_ms = body["max_wait_ms"]
        now = time.monotonic()  # not loop.time(): uvloop's moves in whole milliseconds
        pacer = None if connection is None else self.pacer(connection, now)
        if pacer is not None:
            delay = pacer.hold(body, now)
            if delay > 0:
                await asyncio.sleep(delay)
        response, total, waits, sent = self._read(body, may_read, known)
        if total < max(min_bytes, 1) and max_wait_ms > 0 and waits \
                and await self.broker.wait_for_messages(waits, max_wait_ms / 1000):
            response, total, _, sent = self._read(body, may_read, known)
        traffic = self.traffic
        traffic.messages_out += sent[0]
        traffic.bytes_out += total
        if pacer is not None:
            records, left_behind = sent
            pacer.answered(time.monotonic(), records, left_behind)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": response}

    def _read(self, body: dict[str, Any], may_read: Callable[[str], bool] | None,
              known: Mapping[tuple[str, int], Any] | None = None) -> tuple[list[dict[str, Any]], int, list[tuple[str, int, int]],
                         tuple[int, list[tuple[str, int, int]]]]:
        """One pass over the requested partitions: (responses, record bytes, where to wait,
        (records sent, partitions with data left behind))."""
        broker = self.broker
        committed = body["isolation_level"] == 1
        isolation = Isolation.KAFKA_COMMITTED if committed else Isolation.KAFKA_UNCOMMITTED
        budget = body["max_bytes"]
        total = 0
        records = 0
        waits: list[tuple[str, int, int]] = []
        left_behind: list[tuple[str, int, int]] = []
        responses = []
        for topic_req in body["topics"]:
            topic = topic_req["topic"]
            denied = may_read is not None and not may_read(topic)
            partitions = []
            for p in topic_req["partitions"]:
                index = p["partition"]
                out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE,
                                       "high_watermark": -1, "last_stable_offset": -1,
                                       "log_start_offset": -1, "aborted_transactions": None,
                                       "records": b""}
                partitions.append(out)
                if denied:
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                fenced = epoch_error(broker, p.get("current_leader_epoch", -1))
                if fenced:  # a client that knows another election than this node (KIP-320)
                    out["error_code"] = fenced
                    continue
                offset = p["fetch_offset"]
                high = broker.max_offset(topic, index)
                if offset == high:  # caught up (most partitions of a many-partition consumer): no read
                    try:
                        broker.check_readable(topic, index)
                    except BrokerError as exc:
                        out["error_code"] = error_code_for(exc)
                        continue
                    low = broker.min_offset(topic, index)
                    waits.append((topic, index, offset))
                    if known is not None:
                        seen = known.get((topic, index))
                        if seen is not None and seen.high_watermark == high and seen.log_start == low:
                            partitions.pop()  # nothing the session has not answered (the LSO moves
                            continue  # only with the high watermark: a transaction ends by a marker)
                    out["high_watermark"], out["log_start_offset"] = high, low
                    out["last_stable_offset"] = broker.last_stable_offset(topic, index, high)
                    continue
                room = min(p["partition_max_bytes"], budget - total)
                first = total == 0  # the first partition with data gets its first batch whole
                try:  # the core's read rule (Broker.check_readable), applied once
                    if room > 0 or first:
                        result = broker.get_messages(topic, index, offset, _MAX_COUNT, max_bytes=max(room, 1),
                                                     isolation=isolation)
                    else:  # a full response still reports every partition's offsets
                        broker.check_readable(topic, index)
                        result = None
                except BrokerError as exc:
                    out["error_code"] = error_code_for(exc)
                    continue
                low, high = broker.min_offset(topic, index), broker.max_offset(topic, index)
                stable = broker.last_stable_offset(topic, index, high)
                out["high_watermark"], out["last_stable_offset"] = high, stable
                out["log_start_offset"] = low
                if result is None:
                    if 0 <= offset < high:
                        left_behind.append((topic, index, offset))
                    continue
                if result.status in _OUT_OF_RANGE or (result.status is GetStatus.NO_MATCHED_LOGIC_QUEUE and offset != 0) \
                        or (result.status is GetStatus.NO_MESSAGE_IN_QUEUE and offset not in (low, high)):
                    out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                if not result.segments:
                    # held at the LSO, the data beyond it is there already: wait for more
                    waits.append((topic, index, high if committed and stable <= offset < high else offset))
                    continue
                parts = self._batches(topic, index, result.segments)
                # The store counts stored bytes; the limits count the batches sent: keep the
                # whole batches that fit (all of them but the first may have to go).
                kept = size = 0
                for part in parts:
                    if size + len(part) > room and not (first and kept == 0):
                        break
                    size += len(part)
                    kept += 1
                segments = result.segments
                next_offset = result.next_begin_offset if kept == len(parts) else segments[kept].first_offset
                if next_offset < high:
                    left_behind.append((topic, index, next_offset))
                if kept:
                    out["records"] = parts[:kept]
                    if committed:
                        out["aborted_transactions"] = [
                            {"producer_id": r.producer_id, "first_offset": r.first_offset}
                            for r in broker.aborted_transactions(topic, index, offset, next_offset)]
                    total += size
                    records += sum(seg.count for seg in segments[:kept])
            responses.append({"topic": topic, "partitions": partitions})
        return responses, total, waits, (records, left_behind)

    def _batches(self, topic: str, queue_id: int, segments: list[Segment]) -> list[bytes | memoryview]:
        parts: list[bytes | memoryview] = []
        for seg in segments:
            view = seg.view
            if seg.is_inner_batch:
                (body_len,) = I32.unpack_from(view, POS_BODY_LENGTH)
                parts.append(view[HEADER_SIZE:HEADER_SIZE + body_len])
            else:
                parts.append(self.encoder.encode(topic, queue_id, seg))
        return parts
