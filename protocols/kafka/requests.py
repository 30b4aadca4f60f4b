"""What every Kafka handler family shares: the request's context, the permission checks
and this broker as Kafka clients see it (one node, leader of every partition).

Sans-IO and socket-free like the handlers; it must never hold a connection's state (that
is the session's) or call the store (the facade does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from rocketport.core.auth.plain_acl import ANY, SUB, Account, group_resource
from rocketport.core.broker import Broker

from .errors import ErrorCode

NODE_ID: Final = 0  # this broker is the whole cluster: leader of every partition
MAX_STRING: Final = 0x7FFF  # UTF-8 bytes an int16-length string (every non-flexible version) holds
OFFSET_METADATA_MAX_BYTES: Final = 4096  # Kafka's offset.metadata.max.bytes


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_version: int
    client_id: str | None
    client_host: tuple[str, int]
    principal: Account | None = None  # the SASL-authenticated account; None: SASL is off
    node: BrokerNode | None = None  # where the connection came in, when not the main port (TLS)


Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(slots=True)
class BrokerNode:
    """Where clients reach this broker: the bound port once listening (the front-end sets it)."""

    host: str
    port: int
    node_id: int = NODE_ID  # the brokerId, kept for life: a classic master 0, any other node its own (core/ha)

    def node(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "port": self.port, "rack": None}


def may_use_topic(ctx: RequestContext, topic: str, needed: int = ANY) -> bool:
    """SASL authorization by the plain ACL's permissions (PUB to produce, SUB to read, either
    to see a topic); always true without SASL."""
    return ctx.principal is None or ctx.principal.permits(topic, needed)


def may_use_group(ctx: RequestContext, group: str) -> bool:
    return ctx.principal is None or ctx.principal.permits(group_resource(group), SUB)


def is_admin(ctx: RequestContext) -> bool:
    return ctx.principal is None or ctx.principal.admin


def fits(text: str | None, room: int = MAX_STRING) -> bool:
    """Whether ``text`` fits a string of ``room`` UTF-8 bytes."""
    return text is None or len(text) * 4 <= room or len(text.encode("utf-8")) <= room


def partitions(broker: Broker, topic: str) -> int | None:
    """A topic's partition count (queues both readable and writable), None if none."""
    cfg = broker.get_topic(topic)
    return None if cfg is None else min(cfg.read_queue_nums, cfg.write_queue_nums)


def has_partition(broker: Broker, topic: str, partition: int) -> bool:
    n = partitions(broker, topic)
    return n is not None and 0 <= partition < n


def coordinates(broker: Broker) -> bool:
    """Whether this broker coordinates groups and transactional ids now: only its group's
    master does. A slave's offsets and transaction states are its master's copies; it answers
    NOT_COORDINATOR (as a Kafka broker that is not the coordinator does), so the client asks
    FindCoordinator again and retries at the master, rather than failing the request."""
    return not broker.config.is_slave


def group_leader(broker: Broker, node: BrokerNode) -> int:
    """The group's master as a Kafka node (its own brokerId): this broker, or the master a
    slave follows once its Kafka address is known; -1 otherwise."""
    master = broker.master_broker_id
    if master is not None and (master == node.node_id or master in broker.ha.peers):
        return master
    return -1


def replica_ids(broker: Broker, node: BrokerNode) -> tuple[list[int], list[int]]:
    """Every partition's replicas (the group's members known) and ISR (those in sync)."""
    replicas = sorted({node.node_id, *broker.ha.peers})
    return replicas, sorted(set(broker.in_sync_ids()).intersection(replicas))


def epoch_error(broker: Broker, current_leader_epoch: int) -> int:
    """KIP-320's fencing of a partition request naming the leader epoch its client knows
    (-1: not named): FENCED_LEADER_EPOCH when the client's is older than the election's,
    UNKNOWN_LEADER_EPOCH when newer (this node has not seen that election yet); 0 otherwise."""
    if current_leader_epoch < 0:
        return 0
    epoch = broker.leader_epoch()
    if current_leader_epoch < epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch > epoch else 0
