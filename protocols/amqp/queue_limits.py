"""Queue TTLs and length limits kept on time, whether or not anyone consumes.

A queue here is a reader of topics (a delivery group), so nothing leaves it unless it is
taken from its head. RabbitMQ's delayed-retry pattern (a wait queue with
``x-message-ttl`` and no consumer, dead-lettering back into the work queue) needs expired
messages to leave on time all the same. `QueueLimits` is the one sweep of the virtual host
that does it: for each queue it takes off the head (`DeliveryGroup.drop_head`) what is
past its TTL (the queue's ``x-message-ttl`` or the publisher's ``expiration``: from the
head, as RabbitMQ expires) and, under ``x-overflow`` drop-head, what is beyond
``x-max-length``, and hands them to the dead-letter exchange (`dead_letter.DeadLetters`).
It sleeps until the earliest head is due, at most a second, and is woken by publishes into
such queues; it visits only the queues with a TTL or length limit and those a message
with its own expiration went into, each when its head is due or it was published into. Work per tick is bounded (`_PER_QUEUE` messages a
queue, then a yield), and it waits while the dead-letter backlog is long.

The publish path asks it too: `refuses` says whether a publish into queues with
``x-overflow`` reject-publish(-dlx) must be refused (nacked under confirms), dead-lettering
it for reject-publish-dlx; declare-ok, basic.get and purge counts are taken after
`enforce`, so they never count what has expired.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rocketport.common.message import MessageExt
from rocketport.core.facade.types import now_ms

from .dead_letter import cycles
from .queue_args import EXPIRED, MAXLEN, REJECT_PUBLISH_DLX

if TYPE_CHECKING:
    from .dead_letter import DeadLetters
    from .vhost import QueueState, VirtualHost

log = logging.getLogger(__name__)

_PER_QUEUE = 1024  # messages one queue loses in one go (some ms); then the loop yields
_IDLE_MS = 1000  # the longest sleep: per-message expirations in queues without a TTL
_MIN_SLEEP_S = 0.002
CYCLE = "cycle"  # not a dead-letter reason: the message is dropped


class QueueLimits:
    """The virtual host's expiry and length sweep (see the module docstring)."""

    def __init__(self, vhost: VirtualHost, dead_letters: DeadLetters) -> None:
        self.vhost = vhost
        self.dead_letters = dead_letters
        self._wake = asyncio.Event()
        self._idle: set[str] = set()  # queues whose head was empty at the last look
        # queues without limits that a message with its own expiration went into: looked at
        # until their head has none (the sweep visits only these and the limited ones)
        self._watched: dict[str, QueueState] = {}
        self._visits: dict[str, int] = {}  # when to look at each queue next (ms): its head's due
        self._poked: set[str] = set()  # queues published into since the last step: look now
        self.expired = 0  # messages expired since start (tests, benchmarks)

    # ------------------------------------------------------------------ the sweep
    def enforce(self, state: QueueState, now: int | None = None,
                limit: int = _PER_QUEUE) -> tuple[int | None, bool]:
        """Take off ``state``'s head what is expired or beyond its length; returns when
        its new head is due (ms) or None, and whether more may be due now (the limit
        was reached). Nothing on a slave: its master expires and dead-letters (what a
        slave took off would be gone from it when made master, its dead-letter copy refused)."""
        if self.vhost.broker.config.is_slave:
            return None, False
        policy = state.policy
        now = now_ms() if now is None else now
        drop_head = policy.drops_head
        max_length = policy.max_length
        max_bytes = policy.max_length_bytes
        waiting = state.group.waiting_bytes() if drop_head and max_bytes is not None else 0
        reasons: list[str] = []
        name = state.entity.name
        consumers = state.group.consumer_count
        stored_at = state.group.stored_at

        def refuse(message: MessageExt, behind: int) -> bool:
            nonlocal waiting
            if cycles(message, name):  # back through dead-lettering alone: dropped
                reasons.append(CYCLE)
                return True
            if drop_head and ((max_length is not None and behind >= max_length)
                              or (max_bytes is not None and waiting > max_bytes)):
                waiting -= len(message.body)
                reasons.append(MAXLEN)
                return True
            stored = stored_at(message)
            at = policy.expires_at(message, stored)
            # a TTL of 0 lets a consumer have it: the delivery path decides while there is one
            if at is not None and at <= now and not (consumers and at == stored):
                reasons.append(EXPIRED)
                return True
            return False

        dropped, head = state.group.drop_head(refuse, limit)
        if dropped:
            self.expired += reasons.count(EXPIRED)
            start = 0
            for i in range(1, len(dropped) + 1):  # runs of one reason
                if i == len(dropped) or reasons[i] != reasons[start]:
                    if reasons[start] != CYCLE:
                        self._dead_letter(state, dropped[start:i], reasons[start])
                    start = i
        more = len(dropped) >= limit
        if head is None:
            if not more:
                self._idle.add(name)
            return None, more
        self._idle.discard(name)
        return policy.expires_at(head, stored_at(head)), more

    def _dead_letter(self, state: QueueState, messages: list[MessageExt], reason: str) -> None:
        if state.policy.dead_letter_exchange is not None:
            self.dead_letters.send(state, messages, reason)

    async def run(self) -> None:
        """The sweep, forever (its owner cancels it)."""
        while True:
            await self.dead_letters.room()
            now = now_ms()
            due = now + _IDLE_MS
            more = False
            queues, watched, visits, poked = self.vhost.queues, self._watched, self._visits, self._poked
            self._poked = set()
            for name, state in [*self.vhost.limited.items(), *watched.items()]:
                if queues.get(name) is not state:  # deleted meanwhile
                    watched.pop(name, None)
                    visits.pop(name, None)
                    continue
                visit = visits.get(name, 0)
                if visit > now and name not in poked:  # its head is not due yet
                    due = min(due, visit)
                    continue
                try:
                    head_due, busy = self.enforce(state, now)
                except Exception:
                    log.exception("AMQP queue %s: expiry failed", name)
                    continue
                more = more or busy
                if busy:  # more is due now: on the next step
                    visits[name] = now
                elif head_due is not None:  # (at least once a second: the head may be taken)
                    visits[name] = min(head_due, now + _IDLE_MS)
                    due = min(due, head_due)
                else:  # nothing due: looked at again when published into, or in a second
                    visits[name] = now + _IDLE_MS  # (what other protocols write wakes nothing)
                    watched.pop(name, None)
            if more:
                await asyncio.sleep(0)
                continue
            self._wake.clear()
            if self._poked:
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), max(_MIN_SLEEP_S, (due - now_ms()) / 1000))
            except TimeoutError:
                pass

    def published(self, states: Iterable[QueueState]) -> None:
        """Publishes went into these queues (a TTL or a length limit): look again now if
        one was empty, or is beyond its length."""
        for state in states:
            name = state.entity.name
            if name not in self.vhost.limited and name not in self._watched:
                self._watched[name] = state  # its own expiration: watched until its head has none
                self._poked.add(name)
            elif name in self._idle or state.policy.drops_head:
                self._poked.add(name)
        if self._poked:
            self._wake.set()

    # ------------------------------------------------------------------ reject-publish
    def refuses(self, states: Iterable[QueueState], properties: Mapping[str, str], body: bytes,
                exchange: str) -> bool:
        """Whether a publish reaching ``states`` is refused: one of them is full under
        reject-publish(-dlx) (its expired head taken off first). The publish is then not
        stored; a reject-publish-dlx queue dead-letters it (reason maxlen)."""
        refused = False
        for state in states:
            policy = state.policy
            if not policy.refuses_publishes:
                continue
            self.enforce(state)
            group = state.group
            if policy.full(group.message_count,
                           group.waiting_bytes() if policy.max_length_bytes is not None else 0, len(body)):
                refused = True
                if policy.overflow == REJECT_PUBLISH_DLX:
                    self.dead_letters.send_refused(state, properties, body, exchange)
        return refused
