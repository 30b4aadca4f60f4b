"""A held queue's messages between pull and commit (RocketMQ's ProcessQueue).

Pulled messages wait here, keyed by queue offset, until their listener call is done with
them. Several listener calls may work on one queue at once, finishing in any order, so
the offset a consumer may commit is the lowest offset still here (or one past the
highest pulled when none is left): a message is never skipped by a commit while it is
unfinished. The queue also records when it was last pulled and when each message's
listener call began, which PULL_MAX_IDLE and consumeTimeout read. It does no I/O and
never decides what to do about an idle queue or a late message; the consumer does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .message import MessageExt

Clock = Callable[[], float]


@dataclass(slots=True)
class ProcessQueueInfo:
    """A snapshot of one held queue (the fields of Java's ProcessQueueInfo that apply)."""

    commit_offset: int  # what the consumer commits for the queue now; -1 before any
    cached_msg_min_offset: int  # -1 when nothing is cached
    cached_msg_max_offset: int
    cached_msg_count: int  # pulled and not finished (in a listener call or waiting for one)
    consuming_msg_count: int  # in a listener call now
    locked: bool
    dropped: bool
    last_pull_timestamp: float  # on the consumer's clock
    last_consume_timestamp: float
    last_lock_timestamp: float  # when the broker last granted the queue's lock; 0: never


class ProcessQueue:
    """Unfinished messages of one queue, in offset order; see the module docstring."""

    __slots__ = ("_msgs", "_started", "queue_offset_max", "dropped", "_locked", "last_lock_timestamp",
                 "last_pull_timestamp", "last_consume_timestamp", "pulling_paused", "_clock")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._msgs: OrderedDict[int, MessageExt] = OrderedDict()  # pulled in offset order
        self._started: dict[int, float] = {}  # offset -> when its listener call began
        self.queue_offset_max = -1
        self.dropped = False
        self._locked = False
        self.last_lock_timestamp = 0.0
        now = clock()
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.pulling_paused = False  # flow control holds the puller: not idle

    @property
    def count(self) -> int:
        return len(self._msgs)

    @property
    def locked(self) -> bool:
        return self._locked

    @locked.setter
    def locked(self, value: bool) -> None:
        """Set by each lock round (orderly consumers renew their locks every 20 s)."""
        self._locked = value
        if value:
            self.last_lock_timestamp = self._clock()

    def put(self, msgs: list[MessageExt]) -> None:
        """Messages as pulled (offsets ascending, past every offset already here)."""
        for msg in msgs:
            self._msgs[msg.queue_offset] = msg
        if msgs:
            self.queue_offset_max = max(self.queue_offset_max, msgs[-1].queue_offset)

    def contains(self, msg: MessageExt) -> bool:
        return self._msgs.get(msg.queue_offset) is msg

    def mark_pulled(self) -> None:
        self.last_pull_timestamp = self._clock()

    def begin(self, msgs: Iterable[MessageExt]) -> None:
        """A listener call starts on `msgs`."""
        now = self.last_consume_timestamp = self._clock()
        for msg in msgs:
            self._started[msg.queue_offset] = now

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget `msgs` (finished, or handed to the broker's retry); the offset to commit
        now, or -1 when nothing was here (then nothing moved)."""
        if not self._msgs:
            return -1
        for msg in msgs:
            if self._msgs.get(msg.queue_offset) is msg:
                del self._msgs[msg.queue_offset]
            self._started.pop(msg.queue_offset, None)
        return next(iter(self._msgs)) if self._msgs else self.queue_offset_max + 1

    def clear(self) -> None:
        self._msgs.clear()
        self._started.clear()

    def expired_head(self, timeout_s: float) -> MessageExt | None:
        """The lowest unfinished message when its listener call began over `timeout_s`
        ago (cleanExpiredMsg looks at the head only: it is what holds the commit back)."""
        if not self._msgs:
            return None
        offset, msg = next(iter(self._msgs.items()))
        started = self._started.get(offset)
        if started is None or self._clock() - started <= timeout_s:
            return None
        return msg

    def is_pull_expired(self, max_idle_s: float) -> bool:
        """Not pulled for `max_idle_s` though nothing held the puller back."""
        return not self.pulling_paused and self._clock() - self.last_pull_timestamp > max_idle_s

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        keys = list(self._msgs) if self._msgs else []
        return ProcessQueueInfo(commit_offset, keys[0] if keys else -1, keys[-1] if keys else -1,
                                len(keys), len(self._started), self.locked, self.dropped,
                                self.last_pull_timestamp, self.last_consume_timestamp,
                                self.last_lock_timestamp)
