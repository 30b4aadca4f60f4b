"""Who is connected: consumer group membership and producer groups.

RocketMQ's ConsumerManager / ConsumerGroupInfo and ProducerManager, protocol-neutral. Every
front-end registers its clients here, so a remoting consumer, a Kafka group member and a
STOMP subscriber of one group see one membership and one rebalance. Membership changes are
reported to listeners, which the remoting front-end turns into NOTIFY_CONSUMER_IDS_CHANGED
pushes; the producer table answers "whom do I ask" for transaction check-backs.

A channel is an opaque, hashable object the front-end supplies (usually its connection);
this module never reads from or writes to it. Clients silent for longer than
``channelExpiredTimeout`` (120 s) are dropped by ``scan_expired``, and a closed channel takes
all its registrations with it, so the tables are bounded by the live clients.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

from rocketport.common.tags import tags_code
from rocketport.core.consumer._clock import Clock, monotonic_ms

log = logging.getLogger(__name__)

DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS = 120_000

MessageModel = Literal["CLUSTERING", "BROADCASTING"]
ExpressionType = Literal["TAG", "SQL92"]
SUB_ALL = "*"

ConsumerIdsListener = Callable[[str, list[str]], None]
"""``on_change(group, client_ids)``: client_ids sorted, empty when the group is gone."""


@dataclass(slots=True)
class SubscriptionData:
    """One topic subscription of a consumer group, with the tag hashes a pull filters by."""

    topic: str
    sub_string: str = SUB_ALL
    expression_type: ExpressionType = "TAG"
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = 0

    @classmethod
    def from_expression(
        cls,
        topic: str,
        sub_string: str | None,
        expression_type: ExpressionType = "TAG",
        sub_version: int = 0,
    ) -> SubscriptionData:
        """Build as RocketMQ's FilterAPI does: ``"A || B"`` gives tags {A, B} and their
        hash codes; empty or ``*`` means every tag; SQL92 keeps the expression whole."""
        if expression_type not in get_args(ExpressionType):
            raise ValueError(f"unknown expression type {expression_type!r}")
        if expression_type == "SQL92":
            if not sub_string or not sub_string.strip():
                raise ValueError(f"empty SQL92 expression for topic {topic!r}")
            return cls(topic, sub_string, "SQL92", sub_version=sub_version)
        if not sub_string or sub_string.strip() == SUB_ALL:
            return cls(topic, SUB_ALL, "TAG", sub_version=sub_version)
        tags = frozenset(t.strip() for t in sub_string.split("||") if t.strip())
        return cls(
            topic,
            sub_string,
            "TAG",
            tags,
            frozenset(tags_code(t) for t in tags),
            sub_version,
        )


@dataclass(slots=True)
class _Client:
    channel: object
    last_heartbeat_ms: int


@dataclass(slots=True)
class ConsumerGroupInfo:
    """A consumer group as its latest heartbeat describes it. Read it; do not mutate it."""

    group: str
    consume_type: str
    message_model: MessageModel
    consume_from_where: str
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    clients: dict[str, _Client] = field(default_factory=dict)


class _ChannelIndex:
    """channel -> the (group, client id) registrations it carries, for channel_closed."""

    __slots__ = ("_by_channel",)

    def __init__(self) -> None:
        self._by_channel: dict[object, set[tuple[str, str]]] = {}

    def add(self, channel: object, group: str, client_id: str) -> None:
        self._by_channel.setdefault(channel, set()).add((group, client_id))

    def discard(self, channel: object, group: str, client_id: str) -> None:
        registrations = self._by_channel.get(channel)
        if registrations is not None:
            registrations.discard((group, client_id))
            if not registrations:
                del self._by_channel[channel]

    def pop(self, channel: object) -> set[tuple[str, str]]:
        return self._by_channel.pop(channel, set())

    def __len__(self) -> int:
        return len(self._by_channel)


class ConsumerManager:
    """Consumer groups: members, their channels and the group's subscriptions."""

    def __init__(
        self,
        channel_expired_timeout_ms: int = DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS,
        clock: Clock = monotonic_ms,
    ) -> None:
        self._clock = clock
        self._timeout_ms = channel_expired_timeout_ms
        self._groups: dict[str, ConsumerGroupInfo] = {}
        self._channels = _ChannelIndex()
        self._listeners: list[ConsumerIdsListener] = []

    def add_listener(self, on_change: ConsumerIdsListener) -> None:
        """Call ``on_change(group, client_ids)`` whenever a group's members or topics change."""
        self._listeners.append(on_change)

    def register(
        self,
        group: str,
        client_id: str,
        channel: object,
        consume_type: str,
        message_model: MessageModel,
        consume_from_where: str,
        subscriptions: dict[str, SubscriptionData],
    ) -> bool:
        """Register or refresh a consumer (a full heartbeat); True if the group changed.

        As in RocketMQ, subscriptions belong to the group: a new topic or a topic no longer
        listed is a change; a higher ``sub_version`` replaces the topic's filter quietly.
        A client reconnecting under the same id moves to its new channel without a change.
        """
        if message_model not in get_args(MessageModel):
            raise ValueError(f"unknown message model {message_model!r}")
        now = self._clock()
        info = self._groups.get(group)
        if info is None:
            info = self._groups[group] = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where
            )
        else:
            info.consume_type = consume_type
            info.message_model = message_model
            info.consume_from_where = consume_from_where
        client = info.clients.get(client_id)
        changed = client is None
        if client is None:
            info.clients[client_id] = _Client(channel, now)
            self._channels.add(channel, group, client_id)
        else:
            if client.channel is not channel:
                self._channels.discard(client.channel, group, client_id)
                self._channels.add(channel, group, client_id)
                client.channel = channel
            client.last_heartbeat_ms = now
        changed |= _update_subscriptions(info.subscriptions, subscriptions)
        if changed:
            self._notify(group)
        return changed

    def heartbeat(self, group: str, client_id: str) -> bool:
        """Refresh a registered consumer; False if unknown (the front-end must register)."""
        info = self._groups.get(group)
        client = info.clients.get(client_id) if info is not None else None
        if client is None:
            return False
        client.last_heartbeat_ms = self._clock()
        return True

    def unregister(self, group: str, client_id: str) -> bool:
        """Remove one consumer; True if it was registered."""
        info = self._groups.get(group)
        client = info.clients.get(client_id) if info is not None else None
        if client is None:
            return False
        self._remove(group, client_id)
        self._notify(group)
        return True

    def scan_expired(self, now_ms: int | None = None) -> list[tuple[str, str, object]]:
        """Drop consumers silent for longer than the timeout; returns (group, client id,
        channel) of each so the front-end can close those channels."""
        now = self._clock() if now_ms is None else now_ms
        expired = [
            (group, client_id, client.channel)
            for group, info in self._groups.items()
            for client_id, client in info.clients.items()
            if now - client.last_heartbeat_ms > self._timeout_ms
        ]
        for group, client_id, _ in expired:
            self._remove(group, client_id)
        for group in dict.fromkeys(group for group, _, _ in expired):
            self._notify(group)
        return expired

    def channel_closed(self, channel: object) -> list[str]:
        """Remove every registration carried by ``channel``; returns the groups affected."""
        registrations = self._channels.pop(channel)
        groups = sorted({group for group, _ in registrations})
        for group, client_id in registrations:
            self._remove(group, client_id, channel_gone=True)
        for group in groups:
            self._notify(group)
        return groups

    def client_ids(self, group: str) -> list[str]:
        """The group's client ids, sorted as RocketMQ's rebalance expects."""
        info = self._groups.get(group)
        return sorted(info.clients) if info is not None else []

    def channels(self, group: str) -> list[object]:
        """The group's channels, e.g. to push NOTIFY_CONSUMER_IDS_CHANGED to each."""
        info = self._groups.get(group)
        return [c.channel for c in info.clients.values()] if info is not None else []

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """The group's subscription to ``topic``, or None if it does not subscribe."""
        info = self._groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def group_info(self, group: str) -> ConsumerGroupInfo | None:
        """The group's model, consume-from-where and subscriptions, or None if offline."""
        return self._groups.get(group)

    def group_names(self) -> list[str]:
        """Online consumer groups, sorted."""
        return sorted(self._groups)

    def groups_subscribing(self, topic: str) -> list[str]:
        """Online groups subscribed to ``topic`` (RocketMQ's queryTopicConsumeByWho)."""
        return sorted(g for g, info in self._groups.items() if topic in info.subscriptions)

    def _remove(self, group: str, client_id: str, channel_gone: bool = False) -> None:
        info = self._groups[group]
        client = info.clients.pop(client_id)
        if not channel_gone:
            self._channels.discard(client.channel, group, client_id)
        if not info.clients:
            del self._groups[group]

    def _notify(self, group: str) -> None:
        client_ids = self.client_ids(group)
        for listener in self._listeners:
            try:
                listener(group, list(client_ids))
            except Exception:  # one broken front-end must not stop the others' pushes
                log.exception("consumer ids listener failed for group %s", group)


def _update_subscriptions(
    table: dict[str, SubscriptionData], new: dict[str, SubscriptionData]
) -> bool:
    """Apply one heartbeat's subscriptions to the group's table; True if topics changed."""
    changed = False
    for topic, sub in new.items():
        old = table.get(topic)
        if old is None:
            table[topic] = sub
            changed = True
        elif sub.sub_version > old.sub_version:
            table[topic] = sub
    for topic in [t for t in table if t not in new]:
        del table[topic]
        changed = True
    return changed


class ProducerManager:
    """Producer groups: which channels can answer a transaction check-back."""

    def __init__(
        self,
        channel_expired_timeout_ms: int = DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS,
        clock: Clock = monotonic_ms,
    ) -> None:
        self._clock = clock
        self._timeout_ms = channel_expired_timeout_ms
        self._groups: dict[str, dict[str, _Client]] = {}
        self._channels = _ChannelIndex()
        self._turn = 0

    def register(self, group: str, client_id: str, channel: object) -> None:
        """Register a producer or refresh its heartbeat (and channel, after a reconnect)."""
        now = self._clock()
        clients = self._groups.setdefault(group, {})
        client = clients.get(client_id)
        if client is None:
            clients[client_id] = _Client(channel, now)
            self._channels.add(channel, group, client_id)
            return
        if client.channel is not channel:
            self._channels.discard(client.channel, group, client_id)
            self._channels.add(channel, group, client_id)
            client.channel = channel
        client.last_heartbeat_ms = now

    def unregister(self, group: str, client_id: str) -> bool:
        """Remove one producer; True if it was registered."""
        clients = self._groups.get(group)
        if clients is None or client_id not in clients:
            return False
        self._channels.discard(clients[client_id].channel, group, client_id)
        self._remove(group, client_id)
        return True

    def scan_expired(self, now_ms: int | None = None) -> list[tuple[str, str, object]]:
        """Drop producers silent for longer than the timeout; returns (group, client id,
        channel) of each so the front-end can close those channels."""
        now = self._clock() if now_ms is None else now_ms
        expired = [
            (group, client_id, client.channel)
            for group, clients in self._groups.items()
            for client_id, client in clients.items()
            if now - client.last_heartbeat_ms > self._timeout_ms
        ]
        for group, client_id, channel in expired:
            self._channels.discard(channel, group, client_id)
            self._remove(group, client_id)
        return expired

    def channel_closed(self, channel: object) -> None:
        """Remove every producer registration carried by ``channel``."""
        for group, client_id in self._channels.pop(channel):
            self._remove(group, client_id)

    def pick_channel(self, group: str) -> object | None:
        """A channel to send a transaction check-back to, rotating over the group's live
        producers (as RocketMQ does) so check-backs spread; None if none is live."""
        clients = self._groups.get(group)
        if not clients:
            return None
        now = self._clock()
        live = [
            clients[cid].channel
            for cid in sorted(clients)
            if now - clients[cid].last_heartbeat_ms <= self._timeout_ms
        ]
        if not live:
            return None
        index = self._turn % len(live)
        self._turn = index + 1
        return live[index]

    def client_ids(self, group: str) -> list[str]:
        """The producer group's client ids, sorted."""
        return sorted(self._groups.get(group, ()))

    def _remove(self, group: str, client_id: str) -> None:
        clients = self._groups[group]
        del clients[client_id]
        if not clients:
            del self._groups[group]

