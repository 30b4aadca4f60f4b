"""One AMQP channel's state: consumers, delivery tags, prefetch, confirms and transactions.

Delivery tags are the channel's own (1, 2, ... per channel, as the spec requires); each maps
to the delivery group and the group's tag it stands for, so acks, nacks and rejects
(single or ``multiple``) become group calls. Publisher confirms are sequence numbers in
publish order: a confirm goes out once every earlier publish is settled, so one ack with
``multiple`` covers a run of stored messages (what clients waiting on batches expect).
No I/O here: the session writes what these methods return.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import takewhile
from operator import itemgetter
from typing import Any

from rocketport.common.message import MessageExt
from rocketport.core.facade.types import DeliveryGroup, Subscriber

from .errors import ChannelError, Reply


@dataclass(slots=True, eq=False)  # kept in sets: hashed by identity
class Consumer:
    tag: str
    tag_bytes: bytes
    queue: str
    no_ack: bool
    channel: Channel
    on_queue_deleted: Callable[[Consumer], None]
    subscriber: Subscriber | None = None
    cancelled: bool = False  # basic.cancel: no new deliveries; unacked ones stay the channel's

    def queue_deleted(self) -> None:
        """The vhost dropped our queue: the session tells the client (basic.cancel)."""
        self.on_queue_deleted(self)


@dataclass(slots=True, frozen=True, eq=False)  # grouped by identity
class Source:
    """Where a channel's deliveries come from: a queue and its delivery group (one per
    consumer, one per basic.get)."""

    group: DeliveryGroup
    queue: str


# An unacknowledged delivery: its source, the group's tag for it, and the message (dead-
# lettered from here on a reject without requeue). A plain tuple: one is made per delivery,
# at a seventh of a dataclass's cost.
Unacked = tuple[Source, int, MessageExt]
_SOURCE, _GROUP_TAG = itemgetter(0), itemgetter(1)


@dataclass(slots=True, eq=False)  # kept in sets: hashed by identity
class Channel:
    number: int
    prefetch: int = 0
    confirm: bool = False
    tx: bool = False
    active: bool = True  # channel.flow
    last_queue: str = ""  # the queue an empty queue name means (the last declared)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    unacked: dict[int, Unacked] = field(default_factory=dict)  # in tag order
    next_tag: int = 1
    # confirms: publish sequence numbers settled (True acked, False nacked) or pending (None)
    publish_seq: int = 0
    confirms: deque = field(default_factory=deque)  # [seq, outcome] in publish order
    acked_through: int = 0  # publishes up to here stored, none before them pending: one ack due
    tx_publishes: list = field(default_factory=list)
    tx_answers: list = field(default_factory=list)  # (tag, multiple, requeue; None for an ack)
    # methods run in order: one that waits (a commit, a get) holds the ones after it
    busy: object | None = None
    backlog: deque = field(default_factory=deque)

    def queue_named(self, name: str) -> str:
        """The queue a method names: an empty name is the channel's last declared queue."""
        if name:
            return name
        if not self.last_queue:
            raise ChannelError(Reply.NOT_FOUND, "no previously declared queue")
        return self.last_queue

    # ------------------------------------------------------------------ deliveries
    def add_delivery(self, source: Source, group_tag: int, message: MessageExt, auto_ack: bool) -> int:
        tag = self.next_tag
        self.next_tag = tag + 1
        if not auto_ack:
            self.unacked[tag] = (source, group_tag, message)
        return tag

    def take(self, tag: int, multiple: bool) -> list[Unacked]:
        """Remove and return the deliveries an ack/nack/reject names; an unknown tag is the
        channel error RabbitMQ raises (406 PRECONDITION_FAILED)."""
        unacked = self.unacked
        if multiple:
            chosen = list(takewhile(tag.__ge__, unacked)) if tag else list(unacked)  # tags increase
        else:
            if tag not in unacked:
                raise ChannelError(Reply.PRECONDITION_FAILED, f"unknown delivery tag {tag}")
            chosen = [tag]
        if multiple and tag and not chosen and tag not in unacked:
            raise ChannelError(Reply.PRECONDITION_FAILED, f"unknown delivery tag {tag}")
        return [unacked.pop(t) for t in chosen]

    def take_all(self) -> list[Unacked]:
        taken = list(self.unacked.values())
        self.unacked.clear()
        return taken

    # ------------------------------------------------------------------ confirms
    def next_publish(self) -> int:
        self.publish_seq += 1
        if self.confirm:
            self.confirms.append([self.publish_seq, None])
        return self.publish_seq

    def stored_at_once(self, count: int) -> None:
        """``count`` publishes stored as they came (the store answered without waiting):
        when none before them is pending, one number says what is due, not one entry each."""
        first = self.publish_seq + 1
        self.publish_seq += count
        if self.confirm:
            if self.confirms:
                self.confirms.extend([[seq, True] for seq in range(first, self.publish_seq + 1)])
            else:
                self.acked_through = self.publish_seq

    def settle(self, seq: int, ok: bool) -> None:
        """Record one publish's outcome (the pending sequence numbers are consecutive)."""
        confirms = self.confirms
        if confirms:
            index = seq - confirms[0][0]
            if 0 <= index < len(confirms):
                confirms[index][1] = ok

    def due_confirms(self) -> list[tuple[bool, int, bool]]:
        """The confirms due now as (ack?, delivery tag, multiple), in order: a run of stored
        publishes is one ack with multiple."""
        confirms = self.confirms
        out: list[tuple[bool, int, bool]] = []
        run_end, self.acked_through = self.acked_through, 0
        while confirms and confirms[0][1] is not None:
            s, outcome = confirms.popleft()
            if outcome:
                run_end = s
                continue
            if run_end:
                out.append((True, run_end, True))
                run_end = 0
            out.append((False, s, False))
        if run_end:
            out.append((True, run_end, True))
        return out


# A channel method's handler (the role handlers' tables): None, or an awaitable the
# channel's later methods wait for.
MethodHandler = Callable[[Channel, Any], Any]


def sources(taken: list[Unacked]) -> set[Source]:
    return set(map(_SOURCE, taken))


def group_tags(taken: list[Unacked]) -> dict[DeliveryGroup, list[int]]:
    """The group tags of deliveries by their group; from one source (the common case)
    without a step per delivery in Python."""
    from_sources = sources(taken)
    if len(from_sources) == 1:
        return {from_sources.pop().group: list(map(_GROUP_TAG, taken))}
    by_group: dict[DeliveryGroup, list[int]] = {}
    for source, group_tag, _ in taken:
        by_group.setdefault(source.group, []).append(group_tag)
    return by_group
