"""Transactional messages: half messages, op records and the check-back service.

RocketMQ's two-phase design. A prepared message (``TRAN_MSG=true`` or the PREPARED sys
flag) is stored as a *half* message in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its real
topic and queue kept in ``REAL_TOPIC`` / ``REAL_QID``, so no consumer sees it. The
producer's END_TRANSACTION commits (the real message is put, visible) or rolls back; either
way an *op* record in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (tag ``d``, body = the half's queue
offset) marks the half as resolved.

The check-back service walks the half queue from a progress offset. A half without an op
record and older than ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) is
appended again with ``TRANSACTION_CHECK_TIMES`` + 1 and the copy is handed to the
registered checker, which asks a producer of the group; after ``transactionCheckMax``
checks the half is discarded (copied to ``TRANS_CHECK_MAX_TIME_TOPIC`` and resolved).
Ages are measured from the broker's store timestamp, never a client clock.

Restart safety: all state is derived from the two topics plus two progress offsets kept
as the consumer offsets of the system group ``CID_RMQ_SYS_TRANS`` (as RocketMQ does), so
a crash at worst repeats a check: the producer answers it again (at-least-once). As in
RocketMQ, an END_TRANSACTION that arrives for a half already re-appended by a check does
not resolve the copy: the copy is checked once more and the producer answers the same.

This module never talks to producers itself; the front-end's checker does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from dataclasses import dataclass

from rocketport.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    Message,
    MessageExt,
    reset_transaction_type,
    transaction_type,
)

from .metadata.offsets import ConsumerOffsetManager
from .periodic import run_every
from .schedule import now_ms
from .store.consume_queue import CQ_ENTRY
from .store.message_store import MessageStore, PutResult

log = logging.getLogger(__name__)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_GROUP = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
OP_READ_BATCH = 1024

TransactionChecker = Callable[[str, MessageExt], bool]
"""``checker(producer_group, half) -> bool``: True if a producer was asked for the state."""

Put = Callable[[Message], Awaitable[PutResult]]


def is_prepared(msg: Message) -> bool:
    """Whether a put is the first phase of a transaction."""
    return (transaction_type(msg.sys_flag) == TRANSACTION_PREPARED_TYPE
            or msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true")


def wrap_half(msg: Message) -> None:
    """Turn a prepared message (real queue already chosen) into its half message, in place."""
    props = msg.properties
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    msg.sys_flag = reset_transaction_type(msg.sys_flag, TRANSACTION_NOT_TYPE)
    msg.topic = HALF_TOPIC
    msg.queue_id = 0


def committed_message(half: MessageExt) -> Message:
    """The real message a commit makes visible (RocketMQ's endMessageTransaction)."""
    props = dict(half.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC)
    queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID))
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    props.pop(PROPERTY_TRANSACTION_CHECK_TIMES, None)
    props.pop(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, None)
    return Message(topic, half.body, props, half.flag, queue_id,
                   reset_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE),
                   half.born_timestamp, half.born_host, half.reconsume_times,
                   half.commit_log_offset)


def is_half(msg: MessageExt) -> bool:
    return msg.topic == HALF_TOPIC and PROPERTY_REAL_TOPIC in msg.properties


@dataclass(slots=True)
class CheckStats:
    checked: int = 0
    discarded: int = 0
    resolved: int = 0
    last_round_ms: int = 0  # when the last finished check round began (wall ms)


class TransactionCheckService:
    """Op records, progress offsets and the periodic check-back (one owned task)."""

    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager, *, put: Put,
                 timeout_ms: int, check_max: int, interval_ms: int) -> None:
        self.store = store
        self.offsets = offsets
        self._put = put
        self.timeout_ms = timeout_ms
        self.check_max = check_max
        self.interval_ms = interval_ms
        # every front-end that can reach producers adds one; a check-back asks them in
        # order until one says it asked a producer of the group
        self.checkers: list[TransactionChecker] = []
        # half queue offset -> op queue offset, for resolved halves at or past the progress
        self._removed: dict[int, int] = {}
        self._op_read = 0  # next op offset not yet read into _removed
        self._stop = asyncio.Event()
        self.stats = CheckStats()

    # ---------------------------------------------------------------- progress
    @property
    def half_progress(self) -> int:
        return max(0, self.offsets.query(SYSTEM_GROUP, HALF_TOPIC, 0))

    @property
    def op_progress(self) -> int:
        return max(0, self.offsets.query(SYSTEM_GROUP, OP_TOPIC, 0))

    def load(self) -> None:
        """Rebuild the resolved set from the op records past the persisted progress."""
        self._removed.clear()
        self._op_read = self.op_progress
        self._read_ops()

    # ---------------------------------------------------------------- resolution
    async def resolve(self, half: MessageExt) -> None:
        """Write the op record that marks ``half`` resolved (commit, rollback or discard)."""
        op = Message(OP_TOPIC, str(half.queue_offset).encode(), {PROPERTY_TAGS: REMOVE_TAG},
                     queue_id=0)
        await self._put(op)
        self.stats.resolved += 1

    def _read_ops(self) -> None:
        cq = self.store.get_consume_queue(OP_TOPIC, 0)
        if cq is None:
            return
        progress = self.half_progress
        offset = max(self._op_read, cq.min_offset)
        while offset < cq.max_offset:
            chunk = cq.entries(offset, OP_READ_BATCH)
            if not chunk:
                break
            for phys, _size, _code in CQ_ENTRY.iter_unpack(chunk):
                op = self.store.message_at(phys)
                if op is not None:
                    try:
                        half_offset = int(op.body)
                    except ValueError:
                        half_offset = -1
                    if half_offset >= progress:
                        self._removed.setdefault(half_offset, offset)
                offset += 1
        self._op_read = offset

    # ---------------------------------------------------------------- check-back
    def run(self) -> Coroutine[Any, Any, None]:
        """Check the half queue every interval; a failed round is retried at the next. The
        stop event is made fresh when the task is made (see TxnCoordinator.run)."""
        self._stop = asyncio.Event()
        return run_every(self.interval_ms / 1000, self.check_once, self._stop, name="transaction check")

    def stop(self) -> None:
        self._stop.set()

    async def check_once(self) -> None:
        """One round over the half queue, as RocketMQ's TransactionalMessageServiceImpl.check."""
        now = now_ms()
        self._read_ops()
        cq = self.store.get_consume_queue(HALF_TOPIC, 0)
        if cq is None:
            self.stats.last_round_ms = now
            return
        offset = max(self.half_progress, cq.min_offset)
        end = cq.max_offset  # copies appended during this round wait for the next one
        while offset < end and not self._stop.is_set():
            if offset in self._removed:
                offset += 1
                continue
            entry = cq.entry(offset)
            half = self.store.message_at(entry[0]) if entry is not None else None
            if half is None:  # deleted by retention
                offset += 1
                continue
            props = half.properties
            timeout = self.timeout_ms
            immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity and immunity.isdigit():
                timeout = int(immunity) * 1000
            if now - half.store_timestamp < timeout:
                break  # later halves are younger still
            times = int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0") or 0)
            if times >= self.check_max:
                await self._discard(half)
            else:
                await self._check(half, times + 1)
            offset += 1
            self._read_ops()  # answers that arrived while we were checking
        self._advance(offset)
        self.stats.last_round_ms = now

    async def _check(self, half: MessageExt, times: int) -> None:
        """Append the half again with one more check counted, then ask about the copy."""
        props = dict(half.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        props.setdefault(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(half.queue_offset))
        copy = Message(HALF_TOPIC, half.body, props, half.flag, 0, half.sys_flag,
                       half.born_timestamp, half.born_host, half.reconsume_times, 0)
        result = await self._put(copy)
        self.stats.checked += 1
        stored = self.store.message_at(result.commit_log_offset)
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        if not self.checkers or stored is None:
            log.warning("no transaction checker for group %r; half %d re-queued", group,
                        half.queue_offset)
            return
        asked = False
        for checker in self.checkers:
            try:
                asked = checker(group, stored)
            except Exception:
                log.exception("transaction checker failed for group %r", group)
            if asked:
                break
        if not asked:
            log.info("no producer of group %r to check half %d", group, stored.queue_offset)

    async def _discard(self, half: MessageExt) -> None:
        """Checked transactionCheckMax times without an answer: keep a copy and resolve."""
        props = dict(half.properties)
        copy = Message(CHECK_MAX_TIME_TOPIC, half.body, props, half.flag, 0, half.sys_flag,
                       half.born_timestamp, half.born_host, half.reconsume_times, 0)
        await self._put(copy)
        await self.resolve(half)
        self.stats.discarded += 1
        log.warning("discarding half message %d of group %r after %d checks", half.queue_offset,
                    props.get(PROPERTY_PRODUCER_GROUP), self.check_max)

    def _advance(self, half_offset: int) -> None:
        """Move both progress offsets as far as the resolved set allows."""
        for off in [o for o in self._removed if o < half_offset]:
            del self._removed[off]
        op_offset = min(self._removed.values(), default=self._op_read)
        self.offsets.commit(SYSTEM_GROUP, HALF_TOPIC, 0, half_offset)
        self.offsets.commit(SYSTEM_GROUP, OP_TOPIC, 0, op_offset)
