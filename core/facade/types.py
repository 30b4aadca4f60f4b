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

from ..errors import BrokerError
from ..store.get_result import GetResult, GetStatus, Segment
from ..store.inner_batch import StoredBatch, batches_of
from ..store.record import HEADER_SIZE, I32, POS_BODY_LENGTH, decode_record, encode_record, ip_bytes
from ..store.stored_message import StoredMessage
from ..store.writer import PlainSend, PutResult
from ..txn.producer_state import NO_PRODUCER_ID, SequenceCheck

__all__ = [
    "HEADER_SIZE", "I32", "NO_PRODUCER_ID", "POS_BODY_LENGTH", "GetResult", "GetStatus", "PlainPut",
    "PlainSend", "PutResult", "Segment", "SequenceCheck", "StoredBatch", "StoredMessage", "batches_of",
    "decode_record", "encode_record", "ip_bytes",
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
