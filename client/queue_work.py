"""What a push consumer keeps for one queue it holds: its ProcessQueue, its pull position,
the batches waiting for an orderly listener, the events its tasks wait on and the tasks.

State only: the push consumer and its consume services act on it. It never does I/O.
"""

from __future__ import annotations

import asyncio
from collections import deque

from rocketport.protocols.remoting.bodies import MessageQueue

from .message import MessageExt
from .process_queue import Clock, ProcessQueue


class QueueWork:
    """One held queue; `pq` holds its unfinished messages."""

    __slots__ = ("mq", "pq", "next_offset", "buffer", "ready", "room", "tasks", "consuming",
                 "discard", "closed", "in_flight", "idle")

    def __init__(self, mq: MessageQueue, offset: int, clock: Clock) -> None:
        self.mq = mq
        self.pq = ProcessQueue(clock)
        self.next_offset = offset  # where the next pull starts
        self.buffer: deque[list[MessageExt]] = deque()  # orderly: pulled batches, oldest first
        self.ready = asyncio.Event()  # orderly: something to consume, or the lock came back
        self.room = asyncio.Event()  # flow control: the puller may go on
        self.room.set()
        self.tasks: list[asyncio.Task[None]] = []
        self.consuming = False  # orderly: a batch is in the listener
        # a reset moved the queue: calls still running must not move its offset back
        self.discard = False
        self.closed = False  # dropped and committed: late completions change nothing
        self.in_flight = 0  # concurrent listener calls on this queue now
        self.idle = asyncio.Event()  # set while in_flight == 0
        self.idle.set()

    @property
    def cached(self) -> int:
        """Pulled and not finished (flow control counts these)."""
        return self.pq.count

    @property
    def dropped(self) -> bool:
        return self.pq.dropped

    @property
    def locked(self) -> bool:
        return self.pq.locked

    @locked.setter
    def locked(self, value: bool) -> None:
        self.pq.locked = value

    @property
    def may_move_offset(self) -> bool:
        return not (self.discard or self.closed)
