"""KIP-848 consumer groups kept in the log, so that a restart does not rebalance them.

As Kafka keeps group metadata in ``__consumer_offsets``, every group's state (group and
assignment epochs, target assignment, members with their epochs, subscriptions and
partitions) is written as one record of the compacted system topic
``RMQ_SYS_KAFKA_CONSUMER_GROUPS``, keyed by group id (KEYS), the latest record per group
kept by compaction (core/compaction); a body of ``null`` says the group has no member left.
At start the front-end reads the topic back before it listens, and each member's session
starts afresh: a member that comes back with its id and epoch goes on where it was, one
that does not is fenced after its session timeout, as on a coordinator failover in Kafka.
Being in the CommitLog, the records reach slaves like any other; a slave neither restores
nor writes them (a slave promoted by an election starts its groups afresh: members rejoin).

Written every ``FLUSH_S`` for the groups that changed (their encoded state differs from
the last one written), not before each answer as Kafka does: a SIGKILL loses at most that
much, and a member whose epoch moved in it is answered FENCED_MEMBER_EPOCH and rejoins.
Groups with members speaking the classic protocol (online migration) are not kept: they
rebalance after a restart as before. Never touches sockets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import orjson

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError

from .assignors import Assignment
from .consumer_groups import ConsumerGroup, ConsumerGroupCoordinator, ConsumerMember, MemberState

log = logging.getLogger(__name__)

GROUP_STATE_TOPIC: Final = "RMQ_SYS_KAFKA_CONSUMER_GROUPS"
FLUSH_S: Final = 0.5
_READ_BATCH: Final = 1024
_GONE: Final = b"null"  # the group has no member left


def _assignment(a: Assignment) -> dict[str, list[int]]:
    return {topic: sorted(parts) for topic, parts in sorted(a.items())}


def _parts(a: dict[str, list[int]]) -> Assignment:
    return {topic: set(parts) for topic, parts in a.items()}


def encode_group(group: ConsumerGroup) -> bytes | None:
    """The group's durable state, or None when it is not kept (classic members in it)."""
    if any(m.classic is not None for m in group.members.values()):
        return None
    members = {m.member_id: {
        "instance": m.instance_id, "rack": m.rack_id, "client": m.client_id, "host": m.client_host,
        "rebalance_ms": m.rebalance_timeout_ms, "topics": list(m.subscribed_topic_names),
        "regex": m.subscribed_topic_regex, "assignor": m.server_assignor, "epoch": m.epoch,
        "previous": m.previous_epoch, "state": m.state.value, "assigned": _assignment(m.assigned),
        "revoking": _assignment(m.pending_revocation)} for m in group.members.values()}
    return orjson.dumps({
        "epoch": group.epoch, "assignment_epoch": group.assignment_epoch, "assignor": group.assignor,
        "members": members, "static": group.static_members,
        "target": {mid: _assignment(a) for mid, a in group.target.items()},
        "owners": [[t, p, mid] for (t, p), mid in sorted(group.owners.items())],
        "counts": group.partition_counts}, option=orjson.OPT_SORT_KEYS)


def decode_group(group_id: str, data: bytes) -> ConsumerGroup:
    d: dict[str, Any] = orjson.loads(data)
    group = ConsumerGroup(group_id, d["epoch"], d["assignment_epoch"], assignor=d["assignor"],
                          static_members=dict(d["static"]), partition_counts=dict(d["counts"]))
    group.target = {mid: _parts(a) for mid, a in d["target"].items()}
    group.owners = {(t, p): mid for t, p, mid in d["owners"]}
    for mid, m in d["members"].items():
        group.members[mid] = ConsumerMember(
            mid, m["instance"], m["rack"], m["client"], m["host"], m["rebalance_ms"], tuple(m["topics"]),
            m["regex"], m["assignor"], m["epoch"], m["previous"], MemberState(m["state"]),
            _parts(m["assigned"]), _parts(m["revoking"]))
    return group


class ConsumerGroupLog:
    """Writes the coordinator's groups to the log as they change; reads them back at start."""

    def __init__(self, broker: Broker, coordinator: ConsumerGroupCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._written: dict[str, bytes] = {}  # group id -> the state last written

    async def restore(self) -> int:
        """Read the groups back (before the front-end listens); how many came back."""
        broker = self.broker
        if broker.config.is_slave or broker.get_topic(GROUP_STATE_TOPIC) is None:
            return 0  # a slave serves no group (its members would only be fenced there)
        latest: dict[str, bytes] = {}
        offset, end = broker.min_offset(GROUP_STATE_TOPIC, 0), broker.max_offset(GROUP_STATE_TOPIC, 0)
        while offset < end:
            result = broker.get_messages(GROUP_STATE_TOPIC, 0, offset, _READ_BATCH)
            for msg in result.messages():
                latest[msg.properties.get("KEYS", "")] = msg.body
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        for group_id, body in latest.items():
            if body == _GONE or not group_id:
                continue
            try:
                group = decode_group(group_id, body)
            except (ValueError, KeyError, TypeError):
                log.warning("consumer group %s: its stored state does not decode; it starts empty", group_id)
                continue
            self.coordinator.adopt(group)
            self._written[group_id] = body
        if self._written:
            log.info("%d KIP-848 consumer groups restored from %s", len(self._written), GROUP_STATE_TOPIC)
        return len(self._written)

    async def run(self, stop: asyncio.Event) -> None:
        """Flush every FLUSH_S until ``stop``, then once more."""
        while True:
            try:
                await asyncio.wait_for(stop.wait(), FLUSH_S)
            except asyncio.TimeoutError:
                pass
            await self.flush()
            if stop.is_set():
                return

    async def flush(self) -> None:
        """Write the groups whose state changed since they were last written."""
        current: dict[str, bytes] = {}
        for group_id, group in list(self.coordinator.groups.items()):
            body = encode_group(group) if group.members else None
            if body is not None:
                current[group_id] = body
        writes = [(gid, body) for gid, body in current.items() if self._written.get(gid) != body]
        writes += [(gid, _GONE) for gid in self._written if gid not in current]
        if not writes or self.broker.config.is_slave:  # a slave writes nothing of its own
            return
        try:
            if self.broker.get_topic(GROUP_STATE_TOPIC) is None:
                self.broker.create_topic(GROUP_STATE_TOPIC, read_queue_nums=1, write_queue_nums=1)
                self.broker.set_topic_attributes(GROUP_STATE_TOPIC, {"cleanup.policy": "compact"})
            await self.broker.put_messages([Message(GROUP_STATE_TOPIC, body, {"KEYS": gid}, queue_id=0)
                                            for gid, body in writes])
        except BrokerError as exc:  # a slave, a full disk: the next flush tries again
            log.warning("consumer group state not written: %s", exc)
            return
        for gid, body in writes:
            if body is not _GONE:
                self._written[gid] = body
            else:
                self._written.pop(gid, None)
