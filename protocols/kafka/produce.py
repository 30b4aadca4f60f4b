"""Produce: verify each record batch, apply idempotence, store it whole through the facade.

A batch is checked (magic 2, CRC32C, record count) and stored as one CommitLog entry
covering its records' offsets; the store rewrites its baseOffset, which the CRC does not
cover, so the batch is never recompressed. Records are decoded only when the configured tag
header's name occurs in the (decompressed) payload, to give each record its tags code for
the ConsumeQueue's tag prefilter (keys need nothing here: the store's index reads them from
the stored batch, see core/batch/messages.py).

Produce v12 (Kafka's transaction protocol v2) adds the partitions of a transactional request
to its transaction first, as AddPartitionsToTxn would; older versions need them added.

Every batch of a request is appended, in request order, before any of them waits for its
fsync (SYNC_FLUSH): requests on a connection run concurrently, and a later pipelined request
must never be stored before an earlier one's later partitions, or an idempotent producer's
next batch would look like a gap (OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the client).

Never answers acks=0 (the session drops the response) and never touches sockets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rocketport.common.batch import (
    CompressionError,
    CorruptBatch,
    parse_header,
    split_batches,
)
from rocketport.common.batch.checks import checked_header, checked_payload, stored_tags
from rocketport.common.batch.record_batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    iter_payload_records,
)
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError, MessageTooLarge
from rocketport.core.facade.types import NO_PRODUCER_ID, SequenceCheck

from .. import eager
from ..frontend import Traffic
from .error_map import error_code_for
from .errors import ErrorCode
from .topic_configs import is_compacted

log = logging.getLogger(__name__)

_MAGIC_POS: Final = 16


_NO_RECORD_ERRORS: Final[list[dict[str, Any]]] = []


class _InvalidRecords(Exception):
    """A batch refused for some of its records (INVALID_RECORD, with Produce v8+'s
    record_errors naming each): the whole partition's data is refused."""

    def __init__(self, record_errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(record_errors)} invalid records")
        self.record_errors = record_errors


@dataclass(slots=True)
class _Prepared:
    """One verified batch of a partition, ready to store."""

    view: memoryview
    count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    born_timestamp: int
    transactional: bool
    tags_codes: int | list[int]
    properties: dict[str, str] | None


class ProduceHandler:
    def __init__(self, broker: Broker, tag_header: str) -> None:
        self.broker = broker
        self.tag_header = tag_header
        self.traffic = Traffic()  # the front-end's, once it has one (/metrics)

    async def handle(self, body: dict[str, Any], client_host: tuple[str, int],
                     may_write: Callable[[str], bool] | None = None, *,
                     adds_partitions: bool = False) -> dict[str, Any]:
        """``may_write`` (SASL) says whether the client may produce to a topic;
        ``adds_partitions`` (Produce v12, the transaction protocol v2): a transactional
        request adds the partitions it writes to its transaction before they are stored."""
        acks = body["acks"]
        refused: dict[tuple[str, int], ErrorCode] = {}
        if adds_partitions and body["transactional_id"] is not None and acks in (0, 1, -1):
            refused = await self._add_to_transaction(body, may_write)
        responses = []
        stores: list[tuple[dict[str, Any], eager.Done | asyncio.Task]] = []
        for topic_data in body["topic_data"]:
            topic = topic_data["name"]
            denied = may_write is not None and not may_write(topic)
            partitions = []
            for p in topic_data["partition_data"]:
                out = {"index": p["index"], "error_code": ErrorCode.INVALID_REQUIRED_ACKS, "base_offset": -1,
                       "log_start_offset": -1, "record_errors": _NO_RECORD_ERRORS, "error_message": None}
                partitions.append(out)
                if denied:
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif refused and (topic, p["index"]) in refused:
                    out["error_code"] = refused[(topic, p["index"])]
                elif acks in (0, 1, -1):
                    # appended now, in request order, whatever waits for an fsync: a pipelined
                    # later request must not overtake this one's later partitions (to an
                    # idempotent producer's state its next batch would look like a gap)
                    stores.append((out, eager.start(self._produce_partition(topic, p["index"], p["records"],
                                                                             client_host, acks == -1))))
            responses.append({"name": topic, "partition_responses": partitions})
        for out, outcome in stores:
            try:
                out["error_code"], out["base_offset"] = (outcome.result() if type(outcome) is eager.Done
                                                         else await outcome)
            except _InvalidRecords as exc:
                out.update(error_code=ErrorCode.INVALID_RECORD, record_errors=exc.record_errors,
                           error_message=exc.record_errors[0]["batch_index_error_message"])
        for response in responses:
            for out in response["partition_responses"]:
                out["log_start_offset"] = self._log_start(response["name"], out["index"], out["error_code"])
        return {"responses": responses}

    async def _add_to_transaction(self, body: dict[str, Any], may_write: Callable[[str], bool] | None
                                  ) -> dict[tuple[str, int], ErrorCode]:
        """Add every existing partition whose first batch is transactional to the request's
        transaction, in one coordinator call (one log line); the partitions the coordinator
        refuses, with its code. The producer id and epoch are the batches' (each batch is
        checked against the transaction again when it is stored)."""
        queues: list[tuple[str, int]] = []
        producer: tuple[int, int] | None = None
        for topic_data in body["topic_data"]:
            topic = topic_data["name"]
            if may_write is not None and not may_write(topic):
                continue
            cfg = self.broker.get_topic(topic)
            partitions = 0 if cfg is None else min(cfg.read_queue_nums, cfg.write_queue_nums)
            for p in topic_data["partition_data"]:
                if not 0 <= p["index"] < partitions or not p["records"]:
                    continue
                try:
                    header = parse_header(p["records"])
                except CorruptBatch:  # refused when its batches are checked
                    continue
                if header.attributes & ATTR_TRANSACTIONAL:
                    queues.append((topic, p["index"]))
                    producer = producer or (header.producer_id, header.producer_epoch)
        if producer is None:
            return {}
        try:
            await self.broker.add_partitions_to_txn(body["transactional_id"], *producer, queues)
        except BrokerError as exc:
            code = error_code_for(exc)
            return {queue: code for queue in queues}
        return {}

    def _log_start(self, topic: str, partition: int, code: ErrorCode) -> int:
        if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED):
            return -1
        return self.broker.min_offset(topic, partition)

    async def _produce_partition(self, topic: str, partition: int, records: memoryview | None,
                                 client_host: tuple[str, int], replicated: bool) -> tuple[ErrorCode, int]:
        cfg = self.broker.get_topic(topic)
        if cfg is None or not 0 <= partition < min(cfg.read_queue_nums, cfg.write_queue_nums):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        if not records:
            return ErrorCode.CORRUPT_MESSAGE, -1
        if len(records) > _MAGIC_POS and records[_MAGIC_POS] != 2:
            return ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, -1
        attributes = cfg.attributes
        limit = self.broker.config.max_message_size
        if attributes:  # the topic's own configs (protocols/kafka/topic_configs.py)
            limit = min(limit, int(attributes.get("max.message.bytes", limit)))
        needs_keys = bool(attributes) and is_compacted(attributes)
        try:
            prepared = [self._prepare(records[pos:pos + size], limit, needs_keys)
                        for pos, size in split_batches(records)]
        except (CorruptBatch, CompressionError, BrokerError) as exc:
            log.debug("produce to %s-%d refused: %s", topic, partition, exc)
            return error_code_for(exc), -1
        stored = []  # every batch appended before any waits for its fsync, as the partitions are
        for batch in prepared:
            outcome = eager.start(self._store(topic, partition, batch, client_host, replicated))
            stored.append(outcome)
            if type(outcome) is eager.Done and outcome.result()[0] != ErrorCode.NONE:
                break  # refused: the batches after it are not stored either
        first_offset = -1
        for outcome in stored:
            code, offset = outcome.result() if type(outcome) is eager.Done else await outcome
            if code != ErrorCode.NONE:
                return code, first_offset
            if first_offset < 0:
                first_offset = offset
        return ErrorCode.NONE, first_offset

    def _prepare(self, view: memoryview, limit: int, needs_keys: bool) -> _Prepared:
        """Check one batch and work out its records' tags; raises CorruptBatch or
        MessageTooLarge, and _InvalidRecords when ``needs_keys`` (a compacted topic) and a
        record has no key."""
        header = checked_header(view)
        count = header.records_count
        if len(view) > limit:
            raise MessageTooLarge(len(view), limit)
        payload = checked_payload(view, header)
        if needs_keys:
            keyless = [i for i, r in enumerate(iter_payload_records(bytes(payload), count)) if r.key is None]
            if keyless:
                raise _InvalidRecords([{"batch_index": i, "batch_index_error_message":
                                        "Compacted topic cannot accept message without key."}
                                       for i in keyless])
        tags_codes, properties = stored_tags(payload, count, self.tag_header)
        attributes = header.attributes
        if attributes & ATTR_CONTROL:
            raise CorruptBatch("control batches are written by the transaction coordinator only")
        return _Prepared(view, count, header.producer_id, header.producer_epoch, header.base_sequence,
                         header.base_timestamp, bool(attributes & ATTR_TRANSACTIONAL), tags_codes, properties)

    async def _store(self, topic: str, partition: int, batch: _Prepared,
                     client_host: tuple[str, int], replicated: bool) -> tuple[ErrorCode, int]:
        """One batch stored; ``replicated`` (acks=all) waits for a SYNC_MASTER's slave too."""
        pid = batch.producer_id
        if batch.transactional:  # the core's coordinator: a current producer, an added partition
            try:
                self.broker.check_transactional_write(pid, batch.producer_epoch, topic, partition)
            except BrokerError as exc:
                log.debug("transactional produce to %s-%d refused: %s", topic, partition, exc)
                return error_code_for(exc), -1
        if pid > NO_PRODUCER_ID:  # idempotent: judged by the stored batches (core/txn/producer_state.py)
            verdict, offset = self.broker.check_sequence(pid, batch.producer_epoch, topic, partition,
                                                         batch.base_sequence, batch.count)
            if verdict is SequenceCheck.DUPLICATE:  # answered again once it is durable
                durable = self.broker.durable()
                if durable is not None:
                    await durable
                return ErrorCode.NONE, offset
            if verdict is SequenceCheck.OUT_OF_ORDER:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
            if verdict is SequenceCheck.FENCED:
                return ErrorCode.INVALID_PRODUCER_EPOCH, -1
        # no await before the append: the store reports the batch to the producer state as it
        # appends, so the next batch of this producer is judged against it
        try:
            result = await self.broker.put_record_batch(
                topic, partition, batch.view, batch.count, tags_codes=batch.tags_codes,
                properties=batch.properties, born_timestamp=batch.born_timestamp, born_host=client_host,
                replicated=replicated)
        except BrokerError as exc:
            log.debug("produce to %s-%d failed: %s", topic, partition, exc)
            return error_code_for(exc), -1
        except OSError as exc:  # a limit the store did not type (EMFILE, ENOMEM...): retriable,
            log.warning("produce to %s-%d failed: %s", topic, partition, exc)  # the connection stays
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        traffic = self.traffic
        traffic.messages_in += batch.count
        traffic.bytes_in += len(batch.view)
        traffic.topics.add(topic)
        if traffic.sizes is not None and batch.count:
            traffic.sizes.observe_batch(len(batch.view), batch.count)
        return ErrorCode.NONE, result.queue_offset

