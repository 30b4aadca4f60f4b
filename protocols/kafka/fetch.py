"""Fetch: stored record batches back to consumers, with max-wait / min-bytes long polling.

Kafka-produced batches are served as the exact bytes stored (the CommitLog record's body,
a memoryview into the mapped file: no copy, no re-encode), whole: a consumer skips the
records before its fetch offset itself, as with Kafka. Messages that entered through
another protocol are plain CommitLog records; each contiguous run of them is encoded once
as a record batch (see docs/protocol-kafka.md for the mapping) and kept in a small LRU
cache, since consumers of one group and retried fetches ask for the same runs again.

When less than ``min_bytes`` is available the request waits on the facade's
``wait_for_messages`` on all requested partitions at once, up to ``max_wait_ms``; it never polls on
a timer. Isolation levels 0 and 1 read the same data: the store has no open transactions.
This module never touches sockets.

Sizes follow Kafka's rule (KIP-74): a response never carries more than ``max_bytes`` in all
nor more than a partition's ``partition_max_bytes`` for it, counted in the batch bytes sent,
except that the first batch of the first partition with data is always sent whole, so a
consumer makes progress past a batch larger than its limits.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from rocketport.core.batch import Record, build_batch
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.message import (
    PROPERTY_INNER_NUM,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from rocketport.core.store.get_result import GetStatus, Segment
from rocketport.core.store.record import (
    HEADER_SIZE,
    I32,
    POS_BODY_LENGTH,
    decode_record,
)

from .error_map import error_code_for
from .errors import ErrorCode

_MAX_COUNT: Final = 1 << 20  # the byte limits bound a fetch; this only satisfies the API
_CACHE_ENTRIES: Final = 4096
_CACHE_BYTES: Final = 64 << 20
# properties that describe storage, not the message: never shown to Kafka consumers
_HIDDEN: Final = frozenset({PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_INNER_NUM, PROPERTY_WAIT_STORE_MSG_OK})
_OUT_OF_RANGE: Final = frozenset({GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY})


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
            props = msg.properties
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


class FetchHandler:
    def __init__(self, broker: Broker, encoder: PlainRecordEncoder) -> None:
        self.broker = broker
        self.encoder = encoder

    async def handle(self, body: dict[str, Any], may_read: Callable[[str], bool] | None = None) -> dict[str, Any]:
        """``may_read`` (SASL) says whether the client may fetch from a topic."""
        min_bytes = body["min_bytes"]
        max_wait_ms = body["max_wait_ms"]
        response, total, waits = self._read(body, may_read)
        if total < max(min_bytes, 1) and max_wait_ms > 0 and waits \
                and await self.broker.wait_for_messages(waits, max_wait_ms / 1000):
            response, total, _ = self._read(body, may_read)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": response}

    def _read(self, body: dict[str, Any], may_read: Callable[[str], bool] | None
              ) -> tuple[list[dict[str, Any]], int, list[tuple[str, int, int]]]:
        """One pass over the requested partitions: (responses, record bytes, where to wait)."""
        broker = self.broker
        budget = body["max_bytes"]
        total = 0
        waits: list[tuple[str, int, int]] = []
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
                offset = p["fetch_offset"]
                room = min(p["partition_max_bytes"], budget - total)
                first = total == 0  # the first partition with data gets its first batch whole
                try:  # the core's read rule (Broker.check_readable), applied once
                    if room > 0 or first:
                        result = broker.get_messages(topic, index, offset, _MAX_COUNT, max_bytes=max(room, 1))
                    else:  # a full response still reports every partition's offsets
                        broker.check_readable(topic, index)
                        result = None
                except BrokerError as exc:
                    out["error_code"] = error_code_for(exc)
                    continue
                low, high = broker.min_offset(topic, index), broker.max_offset(topic, index)
                out["high_watermark"] = out["last_stable_offset"] = high
                out["log_start_offset"] = low
                if result is None:
                    continue
                if result.status in _OUT_OF_RANGE or (result.status is GetStatus.NO_MATCHED_LOGIC_QUEUE and offset != 0) \
                        or (result.status is GetStatus.NO_MESSAGE_IN_QUEUE and offset not in (low, high)):
                    out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                if not result.segments:
                    waits.append((topic, index, offset))
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
                if kept:
                    out["records"] = parts[:kept]
                    total += size
            responses.append({"topic": topic, "partitions": partitions})
        return responses, total, waits

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
