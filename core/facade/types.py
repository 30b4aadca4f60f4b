"""The facade's types: what a front-end may hold of the core besides `Broker` itself.

A front-end passes and receives these across the facade: put results and the plain-send
record (`PlainSend`, `PlainPut`), read results and their CommitLog slices (`GetResult`,
`GetStatus`, `Segment`), stored-message views (`StoredMessage`, `StoredBatch` and
`batches_of` for inner batches, `decode_record`), the record encoder a pull response builds
records with (`encode_record`, `ip_bytes`), the record layout offsets a front-end may
read a slice at (`HEADER_SIZE`, `POS_BODY_LENGTH`, `I32`), and the verdicts on an
idempotent producer's batch (`SequenceCheck`, `NO_PRODUCER_ID`: `Broker.check_sequence`).
Protocols import these from here, never from `core.store`, so the store can change behind
the names.

This module holds types and names only: it never stores, reads or decides anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ..consumer.clients import SubscriptionData
from ..consumer.locks import MessageQueueKey
from ..delivery import Delivery, DeliveryGroup, Source, Subscriber
from ..errors import BrokerError
from ..filter import EXPRESSION_TYPE_SQL92, FilterError, MessageFilter, compile_filter
from ..metadata.amqp_entities import (
    EXCHANGE_TYPES,
    AmqpBinding,
    AmqpEntityManager,
    AmqpExchange,
    AmqpExchangeBinding,
    AmqpQueue,
    binding_arguments,
    plain_arguments,
)
from ..metadata.subscription_groups import SubscriptionGroupConfig
from ..metadata.topics import PERM_INHERIT, PERM_RW, PERM_WRITE, validate_topic
from ..retry import retry_topic
from ..schedule import needs_schedule, now_ms
from ..store.get_result import GetResult, GetStatus, Segment
from ..store.inner_batch import StoredBatch, batches_of
from ..store.record import HEADER_SIZE, I32, POS_BODY_LENGTH, decode_record, encode_record, ip_bytes
from ..store.stored_message import StoredMessage
from ..store.writer import PlainSend, PutResult
from ..txn.coordinator import TxnState
from ..txn.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)
from ..txn.producer_state import NO_PRODUCER_ID, SequenceCheck
from ..txn.visibility import Isolation

__all__ = [
    # put and read results, the plain-send records, stored-message views, record layout
    "HEADER_SIZE", "I32", "POS_BODY_LENGTH", "GetResult", "GetStatus", "PlainPut", "PlainSend",
    "PutResult", "Segment", "StoredBatch", "StoredMessage", "batches_of", "decode_record",
    "encode_record", "ip_bytes",
    # topics, groups and their permissions, as front-ends create and check them
    "PERM_INHERIT", "PERM_RW", "PERM_WRITE", "SubscriptionData", "SubscriptionGroupConfig",
    "MessageQueueKey", "validate_topic", "retry_topic",
    # subscriptions' filters
    "EXPRESSION_TYPE_SQL92", "FilterError", "MessageFilter", "compile_filter",
    # delivery groups (STOMP and AMQP consume through them)
    "Delivery", "DeliveryGroup", "Source", "Subscriber",
    # AMQP's declarations, kept by the core so every front-end sees one set
    "EXCHANGE_TYPES", "AmqpBinding", "AmqpEntityManager", "AmqpExchange", "AmqpExchangeBinding",
    "AmqpQueue", "binding_arguments", "plain_arguments",
    # delays
    "needs_schedule", "now_ms",
    # Kafka's transactions and idempotent producers
    "ConcurrentTransactions", "InvalidProducerIdMapping", "InvalidTransactionTimeout", "InvalidTxnState",
    "Isolation", "NO_PRODUCER_ID", "ProducerFenced", "SequenceCheck", "TxnState",
]


@dataclass(slots=True)
class PlainPut:
    """What `Broker.put_plain` did with a list of sends, in their order: ``stored`` for the
    first ``len(stored)`` (each its first (queue offset, commit-log offset), or the error
    that refused that send alone); ``durable`` once asked for under SYNC_FLUSH, resolved
    when they are on disk (answer them after it); ``later``, for the sends from the first
    the lane could not take, the coroutine that stores them as `put_messages` would (a
    PutResult per send; the first refusal raises): the caller starts it at once, so they
    keep their order, and answers them when it finishes."""

    stored: list[tuple[int, int] | BrokerError]
    durable: asyncio.Future[int] | None = None
    later: Coroutine[Any, Any, list[PutResult]] | None = None
