"""Queue locks for orderly consumption: RocketMQ's RebalanceLockManager.

An orderly consumer may only consume a queue while it holds that queue's lock for its group,
so two clients of one group never process the same queue at once, even while a rebalance
moves the queue between them. A lock belongs to a client id and lapses when the client has
not renewed it for ``rebalanceLockMaxLiveTime`` (60 s by default), so a crashed client's
queues are freed without anyone unlocking them.

This module only keeps the table; it never talks to clients and never blocks. Expired
entries are dropped by :meth:`RebalanceLockManager.purge_expired` so the table stays bounded
by the live (group, queue) pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rocketport.core.consumer._clock import Clock, monotonic_ms

DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000


@dataclass(slots=True, frozen=True, order=True)
class MessageQueueKey:
    """One message queue as a client names it (RocketMQ's MessageQueue).

    Ordered by topic, broker name, queue id, as MessageQueue.compareTo, so ``sorted``
    gives the order rebalancing clients agree on.
    """

    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """Per-group queue locks owned by client ids, renewed by locking again."""

    __slots__ = ("_clock", "_max_live_ms", "_groups")

    def __init__(
        self,
        max_live_time_ms: int = DEFAULT_REBALANCE_LOCK_MAX_LIVE_TIME_MS,
        clock: Clock = monotonic_ms,
    ) -> None:
        if max_live_time_ms <= 0:
            raise ValueError(f"rebalanceLockMaxLiveTime must be positive, got {max_live_time_ms}")
        self._clock = clock
        self._max_live_ms = max_live_time_ms
        self._groups: dict[str, dict[MessageQueueKey, _LockEntry]] = {}

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueueKey], client_id: str
    ) -> set[MessageQueueKey]:
        """Lock what can be locked for ``client_id`` and return exactly those queues.

        Queues this client already holds are renewed; free or expired ones are granted;
        queues held by another live client are left out.
        """
        now = self._clock()
        locked: set[MessageQueueKey] = set()
        table = self._groups.get(group)
        for mq in mqs:
            if table is None:
                table = self._groups[group] = {}
            entry = table.get(mq)
            if entry is None:
                table[mq] = _LockEntry(client_id, now)
            elif entry.client_id == client_id or self._expired(entry, now):
                entry.client_id = client_id
                entry.last_update_ms = now
            else:
                continue
            locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueueKey], client_id: str) -> None:
        """Release the queues among ``mqs`` that ``client_id`` holds; others stay as they are."""
        table = self._groups.get(group)
        if table is None:
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
        if not table:
            del self._groups[group]

    def is_locked(self, group: str, mq: MessageQueueKey, client_id: str) -> bool:
        """Whether ``client_id`` holds a live lock on ``mq``; a pure query, it renews nothing."""
        table = self._groups.get(group)
        entry = table.get(mq) if table is not None else None
        return (
            entry is not None
            and entry.client_id == client_id
            and not self._expired(entry, self._clock())
        )

    def purge_expired(self) -> int:
        """Drop expired locks (and emptied groups); returns how many went. Run periodically."""
        now = self._clock()
        purged = 0
        for group in list(self._groups):
            table = self._groups[group]
            for mq in [mq for mq, entry in table.items() if self._expired(entry, now)]:
                del table[mq]
                purged += 1
            if not table:
                del self._groups[group]
        return purged

    def __len__(self) -> int:
        """Number of lock entries held, live or not yet purged."""
        return sum(len(table) for table in self._groups.values())

    def _expired(self, entry: _LockEntry, now: int) -> bool:
        # Strictly greater, as RocketMQ: a lock renewed exactly max-live ago still holds.
        return now - entry.last_update_ms > self._max_live_ms
