"""Delayed delivery: RocketMQ's ScheduleMessageService over ``SCHEDULE_TOPIC_XXXX``.

A message with a ``DELAY`` level (1..N of ``messageDelayLevel``) or a delivery time
(``TIMER_DELIVER_MS`` absolute ms, ``TIMER_DELAY_SEC`` relative) is stored in
``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with its real topic and queue in ``REAL_TOPIC``
/ ``REAL_QID``. Its due time is kept in ``TIMER_OUT_MS`` and, through the store's
``tags_code_of`` hook, in the ConsumeQueue entry's tagsCode (as RocketMQ does), so the
service finds due messages from the ConsumeQueue alone without reading the CommitLog.

Every message of one level queue has the same delay, so due times grow along the queue and
one task per level only ever looks at the head: it sleeps until the head is due (or until
a message arrives in an empty queue), then hands the restored messages back to the broker's
put path, a round at a time. Nothing here polls.

Delivery times beyond the fixed levels ("nearest level and re-schedule"): a timer message
goes to the largest level whose delay does not exceed the time left (the first level if
none does); when that level delivers it and its time has not come, the put path parks it
again for the time left. Each hop at least halves the wait with the default levels, and a
message is never delivered before its time. Its worst lateness is the first level's delay
minus the time left when it is below that delay (< 1 s with the default levels: the
precision RocketMQ 5's timer has by default).

Restart safety: the next offset to deliver per level is persisted in
``config/delayOffset.json`` (RocketMQ's ``offsetTable`` keyed by level), only after the
CommitLog is durable up to every delivery it covers. A crash re-delivers what was
delivered since the last persist: at-least-once, never lost, never early.

This module never decides where a message goes beyond undoing the schedule wrapping, and
never talks to clients.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from rocketport.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    Message,
    MessageExt,
)

from .consumer._clock import LOOP_TIMERS, Clock, Timers
from .errors import BrokerError, InvalidMessage, StoreUnavailable
from .metadata.json_file import JsonFile
from .periodic import run_every
from .store.consume_queue import CQ_ENTRY
from .store.message_store import MessageStore, PutResult

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# RocketMQ 5 stores a timer message's computed due time under this name.
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
DELIVER_BATCH = 256  # due entries delivered per round; the puts of a round run together
RETRY_AFTER_S = 1.0  # back-off after a failed round (the round is delivered again)

_WRAPPING = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_DELAY_TIME_LEVEL,
             PROPERTY_TIMER_OUT_MS)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def schedule_due_ms(properties: dict[str, str]) -> int:
    """The tagsCode of a SCHEDULE_TOPIC_XXXX entry: the message's due time (ms)."""
    try:
        return int(properties.get(PROPERTY_TIMER_OUT_MS, 0))
    except ValueError:
        return 0


def needs_schedule(properties: dict[str, str]) -> bool:
    """Cheap test on the put path: does the message carry a delay property at all?"""
    return (PROPERTY_DELAY_TIME_LEVEL in properties or PROPERTY_TIMER_DELIVER_MS in properties
            or PROPERTY_TIMER_DELAY_SEC in properties)


@dataclass(slots=True, frozen=True)
class DelayLevels:
    """The parsed ``messageDelayLevel`` table (level ``i`` waits ``delays_ms[i - 1]``)."""

    delays_ms: tuple[int, ...]

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def delay_of(self, level: int) -> int:
        return self.delays_ms[level - 1]

    def level_for_wait(self, wait_ms: int) -> int:
        """The largest level whose delay is at most ``wait_ms``; level 1 if none is.

        Assumes the table is ascending, as every RocketMQ configuration is; an unsorted
        table still never delivers early, it only re-schedules more often.
        """
        return max(1, bisect.bisect_right(self.delays_ms, wait_ms))


def wrap_for_schedule(msg: Message, levels: DelayLevels, now: int) -> bool:
    """Move ``msg`` (its real queue already chosen) into its schedule queue, in place.

    Returns False when the message must go to its real topic now: no delay, a level of 0
    or less, or a delivery time that has come (its timer properties are then dropped).
    A level above the table's maximum is clamped to it, as RocketMQ does.
    """
    props = msg.properties
    deliver_at = _deliver_at(props, now)
    if deliver_at is not None:
        if deliver_at <= now:
            props.pop(PROPERTY_TIMER_DELIVER_MS, None)
            return False
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_at)
        level = levels.level_for_wait(deliver_at - now)
    else:
        raw = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if raw is None:
            return False
        try:
            level = int(raw)
        except ValueError:
            raise InvalidMessage(f"DELAY must be an integer level, got {raw!r}") from None
        if level <= 0:
            return False
        level = min(level, levels.max_level)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    props[PROPERTY_TIMER_OUT_MS] = str(now + levels.delay_of(level))
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = level - 1
    return True


def _deliver_at(props: dict[str, str], now: int) -> int | None:
    """Absolute delivery time from TIMER_DELIVER_MS or TIMER_DELAY_SEC (which becomes the
    former, so a re-schedule after restart keeps the original target)."""
    raw = props.get(PROPERTY_TIMER_DELIVER_MS)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            raise InvalidMessage(f"TIMER_DELIVER_MS must be ms since the epoch, got {raw!r}") from None
    raw = props.pop(PROPERTY_TIMER_DELAY_SEC, None)
    if raw is None:
        return None
    try:
        return now + int(float(raw) * 1000)
    except ValueError:
        raise InvalidMessage(f"TIMER_DELAY_SEC must be a number of seconds, got {raw!r}") from None


def unwrap_scheduled(msg: MessageExt) -> Message:
    """The message as its producer sent it, addressed to its real topic and queue."""
    props = dict(msg.properties)
    topic = props.get(PROPERTY_REAL_TOPIC)
    queue = props.get(PROPERTY_REAL_QUEUE_ID)
    if topic is None or queue is None:
        raise InvalidMessage(f"scheduled message at {msg.commit_log_offset} has no real topic")
    for name in _WRAPPING:
        props.pop(name, None)
    return Message(topic, msg.body, props, msg.flag, int(queue), msg.sys_flag,
                   msg.born_timestamp, msg.born_host, msg.reconsume_times,
                   msg.prepared_transaction_offset)


class DelayOffsets:
    """Per-level next offset to deliver, persisted as RocketMQ's delayOffset.json."""

    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "delayOffset.json"))
        self.table: dict[int, int] = {}

    def load(self) -> None:
        data = self.file.load() or {}
        self.table = {int(level): int(offset)
                      for level, offset in data.get("offsetTable", {}).items()}

    def save(self, table: dict[int, int]) -> None:
        """Blocking atomic write (temp file, fsync, rename); run it in a worker thread."""
        self.file.save({"offsetTable": {str(level): offset
                                        for level, offset in sorted(table.items())}})


# puts restored messages in order: one PutResult or BrokerError per message
Deliver = Callable[[list[Message]], Awaitable[list[PutResult | BrokerError]]]
WaitArrival = Callable[[str, int, int, float], Awaitable[bool]]


class ScheduleMessageService:
    """One owned task per level delivering due messages, plus the offset persister."""

    def __init__(self, store: MessageStore, levels: DelayLevels, offsets: DelayOffsets,
                 deliver: Deliver, wait_arrival: WaitArrival, persist_interval_ms: int, *,
                 clock: Clock = now_ms, timers: Timers = LOOP_TIMERS) -> None:
        """``clock`` (wall milliseconds, what due times are) and ``timers`` (the waits for
        the next due message): tests pass fakes and move time on themselves."""
        self.store = store
        self._clock = clock
        self._timers = timers
        self._sleeping: set[asyncio.Future[bool]] = set()  # levels waiting for a due time
        self.levels = levels
        self.offsets = offsets
        self._deliver = deliver
        self._wait_arrival = wait_arrival
        self._persist_interval = persist_interval_ms / 1000
        self._stop = asyncio.Event()
        self._persisted: dict[int, int] = {}
        self.delivered = 0

    async def run(self, tasks: asyncio.TaskGroup) -> None:
        """Start the level tasks in ``tasks`` (owned by the broker); again after a `stop`
        when an elected master is promoted once more (a fresh stop event: the old tasks
        still see theirs set)."""
        self._stop = asyncio.Event()
        for level in range(1, self.levels.max_level + 1):
            tasks.create_task(self._run_level(level), name=f"schedule-level-{level}")

    def persister(self, stop: asyncio.Event) -> Coroutine[Any, Any, None]:
        """The task writing the offsets every persist interval until ``stop``, whatever the
        role: a master's levels move them as they deliver, a slave's replicated offset
        records (core/ha/offset_log.py) as its master's did, so a SIGKILLed slave keeps
        them as a master does."""
        self._persisted = dict(self.offsets.table)  # as loaded
        return run_every(self._persist_interval, self.persist, stop,
                         name="persisting delay offsets", survives=(OSError,))

    def stop(self) -> None:
        """Ask every task to finish; the broker awaits them, then calls :meth:`persist`."""
        self._stop.set()
        for waiter in self._sleeping:
            if not waiter.done():
                waiter.set_result(True)

    async def _sleep(self, delay_s: float) -> None:
        """Until ``delay_s`` passes on the timers, or the service stops."""
        waiter = asyncio.get_running_loop().create_future()
        self._sleeping.add(waiter)
        timer = self._timers.call_later(delay_s, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._sleeping.discard(waiter)

    async def _run_level(self, level: int) -> None:
        queue_id = level - 1
        stop = self._stop
        while not stop.is_set():
            offset = self.offsets.table.get(level, 0)
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, queue_id)
            if cq is not None and offset < cq.min_offset:
                log.warning("delay level %d: offset %d below min %d (retention); skipping",
                            level, offset, cq.min_offset)
                offset = self.offsets.table[level] = cq.min_offset
            chunk = cq.entries(offset, DELIVER_BATCH) if cq is not None else b""
            if not chunk:
                # no await between the look and the hold: a put cannot slip between them
                await self._wait_arrival(SCHEDULE_TOPIC, queue_id, offset, 3600.0)
                continue
            now = self._clock()
            due: list[int] = []
            wait_ms = 0
            for phys, _size, due_ms in CQ_ENTRY.iter_unpack(chunk):
                if due_ms > now:
                    wait_ms = due_ms - now
                    break
                due.append(phys)
            if due:
                try:
                    await self._deliver_all(due)
                except StoreUnavailable as exc:  # keep the offset: redeliver once it recovers
                    log.error("delay level %d: store unavailable (%s); retrying in %.0f s",
                              level, exc, RETRY_AFTER_S)
                    wait_ms = int(RETRY_AFTER_S * 1000)
                except Exception:  # a bug must not take the broker's task group down
                    log.exception("delay level %d: delivery failed; retrying", level)
                    wait_ms = int(RETRY_AFTER_S * 1000)
                else:
                    self.offsets.table[level] = offset + len(due)
            if wait_ms:
                await self._sleep(wait_ms / 1000)
            else:  # a backlog of due messages: let clients in between rounds
                await asyncio.sleep(0)

    async def _deliver_all(self, physical_offsets: list[int]) -> None:
        """Put the restored messages with one call (in order within each queue; the
        messages of one queue share an append: see Broker.put_restored). A message that
        cannot be delivered (its topic was deleted...) is logged and dropped, as RocketMQ
        does, so one bad message never blocks its level; StoreUnavailable fails the round."""
        messages = []
        for phys in physical_offsets:
            stored = self.store.message_at(phys)
            if stored is None:
                log.error("scheduled message at %d is gone from the commit log", phys)
                continue
            try:
                messages.append(unwrap_scheduled(stored))
            except (BrokerError, ValueError) as exc:  # a garbled message
                log.error("cannot deliver scheduled message at %d: %s", phys, exc)
        for outcome in await self._deliver(messages):
            if isinstance(outcome, BrokerError):
                log.error("cannot deliver a scheduled message: %s", outcome)
            else:
                self.delivered += 1

    async def persist(self) -> None:
        """Write the offsets once the CommitLog durably holds what they cover."""
        if self.offsets.table == self._persisted:
            return
        table = dict(self.offsets.table)
        flush = self.store.flush_service
        if flush is not None:
            await flush.flush()  # deliveries before the snapshot are durable first
        await asyncio.to_thread(self.offsets.save, table)
        self._persisted = table


def _wake(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
