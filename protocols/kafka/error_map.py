"""The one place where the core's typed errors become Kafka error codes.

Handlers catch a core exception and ask :func:`error_code_for` which code answers it, so a
rule such as "an unknown queue is UNKNOWN_TOPIC_OR_PARTITION" is written once. This module
decides nothing else: it never logs, retries or builds responses.
"""

from __future__ import annotations

from typing import Final

from rocketport.common.batch import CompressionError, CorruptBatch
from rocketport.core.errors import (
    FlushSlaveTimeout,
    InvalidMessage,
    InvalidTopicName,
    MessageTooLarge,
    NotMaster,
    QueueNotFound,
    SlaveNotAvailable,
    StoreUnavailable,
    TopicNotFound,
    TopicNotReadable,
)
from rocketport.core.facade.types import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)

from .errors import ErrorCode

_CODES: Final[tuple[tuple[type[BaseException], ErrorCode], ...]] = (
    (TopicNotFound, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (TopicNotReadable, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (QueueNotFound, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (InvalidTopicName, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (MessageTooLarge, ErrorCode.MESSAGE_TOO_LARGE),
    (CorruptBatch, ErrorCode.CORRUPT_MESSAGE),
    (CompressionError, ErrorCode.CORRUPT_MESSAGE),
    (InvalidMessage, ErrorCode.INVALID_REQUEST),
    # a slave is a follower; a SYNC_MASTER's put stored but not acknowledged by a slave:
    # what Kafka answers acks=all when the ISR shrank after the append, or timed out
    (NotMaster, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (SlaveNotAvailable, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
    (FlushSlaveTimeout, ErrorCode.REQUEST_TIMED_OUT),
    (StoreUnavailable, ErrorCode.KAFKA_STORAGE_ERROR),
    # a fenced producer's writes: INVALID_PRODUCER_EPOCH, which every client version knows;
    # the coordinator's APIs answer PRODUCER_FENCED where the version allows (handlers.py)
    (ProducerFenced, ErrorCode.INVALID_PRODUCER_EPOCH),
    (InvalidProducerIdMapping, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
    (InvalidTxnState, ErrorCode.INVALID_TXN_STATE),
    (ConcurrentTransactions, ErrorCode.CONCURRENT_TRANSACTIONS),
    (InvalidTransactionTimeout, ErrorCode.INVALID_TRANSACTION_TIMEOUT),
)


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka code for a core error; UNKNOWN_SERVER_ERROR for anything unforeseen."""
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR
