"""KIP-848's consumer groups: the broker assigns, members reconcile, epochs fence zombies.

Each member heartbeats (ConsumerGroupHeartbeat) with its subscription and the partitions
it owns; the coordinator keeps three numbers apart, as Kafka's GroupMetadataManager does:

- the **group epoch**, bumped whenever membership or a subscription (or a subscribed
  topic's partition count) changes;
- the **assignment epoch**: the group epoch the current *target assignment* was computed
  for, by the server-side assignor (``assignors.py``) when the group epoch moves past it;
- each **member epoch**: the target epoch the member has reconciled to. A member moves
  towards its target in steps: partitions it must give up are first *revoked* (it keeps its
  epoch until a heartbeat no longer lists them), and a partition is handed to its new owner
  only once the previous owner has released it; a member waiting for one is
  ``UNRELEASED_PARTITIONS``.

A member whose epoch does not match is fenced (FENCED_MEMBER_EPOCH); one silent for the
session timeout, or holding revoked partitions past its rebalance timeout, is removed and
its partitions go to the others. Static members (``group.instance.id``) that leave with
epoch -2 keep their partitions until they return (with a new member id) or the session
timeout expires.

Groups survive a restart through the log (consumer_group_log.py: written every half second,
read back before the front-end listens). Departures from Kafka: a heartbeat naming a group
or member this broker does not know (a group changed in the last half second before a
SIGKILL) is answered UNKNOWN_MEMBER_ID (Kafka: GROUP_ID_NOT_FOUND for an unknown group), and
the client rejoins with epoch 0; and a member rejoining with epoch 0 under its own (client-generated, KIP-1082)
member id starts over at once instead of being fenced until its old session expires.

Online migration (KIP-848, Kafka's ``group.consumer.migration.policy``): a consumer-protocol
member joining a running classic group whose members speak the embedded consumer protocol
*upgrades* it: the classic members become members of the consumer group with their
subscriptions and current partitions (``consumer_protocol.py`` reads them), and go on
speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup, served here. The broker computes their
assignments as for anyone else: a Heartbeat answers REBALANCE_IN_PROGRESS when a classic
member must catch up (the group moved on, it must revoke, or partitions it waits for are
free), its JoinGroup reconciles it one step (the partitions its subscription still lists as
owned are the ones it holds) and answers at once, its SyncGroup returns what it now holds.
When the last consumer-protocol member leaves a group of classic members, the group is
*downgraded*: handed back to the classic coordinator, which starts a rebalance. A policy
without upgrades answers a heartbeat for a running classic group GROUP_ID_NOT_FOUND (Kafka's
answer without migration); without downgrades the classic members stay in the consumer
group. A JoinGroup the group cannot read (not the embedded consumer protocol, or no assignor
in common with the other classic members) is INCONSISTENT_GROUP_PROTOCOL.

Offsets are not kept here: commits go to the core's offset store like every protocol's;
this module only says whether a commit's member and epoch are current. Timers are the
event loop's TimerHandles, all cancelled by :meth:`close`; no sockets, no codec.
"""

from __future__ import annotations

import enum
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import re2

from .assignors import ASSIGNORS, Assignment, MemberSpec
from .consumer_protocol import (
    ConsumerProtocolError,
    encode_assignment,
    parse_assignment,
    parse_subscription,
    protocol_version,
)
from .coordinator import (
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    CallLater,
    Group,
    GroupCoordinator,
    GroupError,
    GroupState,
    JoinResult,
    Member,
    Timer,
    schedule,
)
from .errors import ErrorCode

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL: Final = "consumer"  # the classic protocol type of Kafka consumers
LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2
REGEX_REFRESH_S: Final = 1.0  # how stale a regex subscription's topic list may be
# Kafka matches subscription regexes with RE2 (RE2/J): so does this module, with Google's RE2
# itself: the same syntax, and matching in linear time, so no client's pattern can stall
# the event loop with backtracking (Python's re would)
_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 1 << 20


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """Kafka's group.consumer.* broker settings."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy, Kafka's default

    @property
    def upgrade(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")


class GroupFailure(Exception):
    """A heartbeat the group cannot accept: the Kafka code and message to answer with."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(slots=True)
class HeartbeatRequest:
    """A decoded ConsumerGroupHeartbeat, topics by name (the handler maps ids)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None  # None: unchanged since the last heartbeat
    client_id: str
    client_host: str
    version: int


@dataclass(slots=True)
class HeartbeatReply:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None: unchanged, not sent


@dataclass(slots=True)
class ClassicProtocol:
    """What a member speaking the classic protocol brought: it is timed out by its own
    session timeout and must come back within its rebalance timeout when told to rejoin
    (``deadline``: the join, then the sync, it owes)."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]  # JoinGroup's, the member's preferred first
    deadline: Timer | None = None

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]

    def encode(self, assignment: Assignment) -> bytes:
        """SyncGroup's assignment bytes, in the consumer protocol version the member speaks."""
        return encode_assignment(assignment, protocol_version(self.protocols[0][1]))


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_timer: Timer | None = None
    rebalance_timer: Timer | None = None
    classic: ClassicProtocol | None = None  # a member speaking JoinGroup/SyncGroup (online migration)


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # partition -> member holding it
    partition_counts: dict[str, int] = field(default_factory=dict)  # subscribed topics that exist
    assignor: str = "uniform"
    regex_topics: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState name."""
        if not self.members:
            return "Empty"
        if self.epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"


class ConsumerGroupCoordinator:
    """Every KIP-848 consumer group of this broker."""

    def __init__(self, classic: GroupCoordinator, topics: Callable[[], list[str]],
                 partition_count: Callable[[str], int | None],
                 settings: ConsumerGroupSettings | None = None,
                 call_later: CallLater | None = None) -> None:
        """``topics`` lists the topic names a regex may match; ``partition_count`` is a
        topic's partition count (None when it does not exist)."""
        self.classic = classic
        self.topics = topics
        self.partition_count = partition_count
        self.settings = settings or ConsumerGroupSettings()
        self.groups: dict[str, ConsumerGroup] = {}
        self._call_later = call_later

    def _later(self, delay_s: float, callback: Callable[..., object], *args: Any) -> Timer:
        return schedule(self._call_later, delay_s, callback, *args)

    def close(self) -> None:
        for group in self.groups.values():
            for m in group.members.values():
                self._cancel_timers(m)
        self.groups.clear()

    def adopt(self, group: ConsumerGroup) -> None:
        """Take a group read back from the log (consumer_group_log.py): its members' sessions
        start now, so one that does not come back is fenced after its session timeout."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._touch(group, member)

    def forget(self, group_id: str) -> None:
        """Drop an empty group (a classic group takes its id over)."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat
    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatReply:
        """Join, heartbeat or leave; raises GroupFailure with the code to answer."""
        self._validate(req)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        group = self._group_for(req)
        member, joined = self._member_for(group, req)
        subscription_changed = self._update_member(member, req)
        if joined:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        counts = self._partition_counts(group)
        if subscription_changed or counts != group.partition_counts:
            group.partition_counts = counts
            group.epoch += 1
            log.info("consumer group %s: epoch %d (%s)", group.group_id, group.epoch,
                     "member joined" if joined else "subscription or topics changed")
        if group.epoch > group.assignment_epoch:
            self._compute_target(group)
        before = _copy(member.assigned)
        self._reconcile(group, member, req.owned)
        self._touch(group, member)
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                                         and req.owned is not None)
        return HeartbeatReply(member.member_id, member.epoch, self.settings.heartbeat_interval_ms,
                              _copy(member.assigned) if full or before != member.assigned else None)

    def _validate(self, req: HeartbeatRequest) -> None:
        bad = GroupFailure
        if not req.group_id:
            raise bad(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id == "":
            raise bad(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise bad(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if req.version >= 1 and not req.member_id:
            raise bad(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_EPOCH:
            if not req.member_id:
                raise bad(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise bad(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise bad(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                raise bad(ErrorCode.INVALID_REQUEST,
                          "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if not req.member_id:
                raise bad(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
            if req.instance_id is None:
                raise bad(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise bad(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.settings.assignors:
            raise bad(ErrorCode.UNSUPPORTED_ASSIGNOR,
                      f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                      f"{', '.join(self.settings.assignors)}.")
        if req.subscribed_topic_regex:
            _compile_regex(req.subscribed_topic_regex)

    def _group_for(self, req: HeartbeatRequest) -> ConsumerGroup:
        group = self.groups.get(req.group_id)
        if group is not None:
            return group
        if req.member_epoch != 0:  # lost with a restart, or never here: the member rejoins
            raise GroupFailure(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {req.member_id} is not a member of group {req.group_id}.")
        classic = self.classic.groups.get(req.group_id)
        if classic is not None:
            if classic.members or classic.state is not GroupState.EMPTY:
                return self._upgrade(classic)
            self.classic.forget(req.group_id)  # an empty classic group becomes a consumer group
        group = self.groups[req.group_id] = ConsumerGroup(req.group_id, assignor=self.settings.assignors[0])
        return group

    # ------------------------------------------------------------------ online migration
    def _upgrade(self, classic: Group) -> ConsumerGroup:
        """A running classic group becomes a consumer group (Kafka's ConsumerGroup.fromClassicGroup):
        its generation is the group and assignment epoch, each member keeps its subscription and
        the partitions its last SyncGroup gave it, as its current and target assignment."""
        group_id = classic.group_id
        if not self.settings.upgrade or classic.protocol_type != CONSUMER_PROTOCOL:
            raise GroupFailure(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        try:
            parsed = [(m, parse_subscription(m.metadata_for(classic.protocol_name) if classic.protocol_name
                                             else m.protocols[0][1]), parse_assignment(m.assignment))
                      for m in classic.members.values()]
        except (ConsumerProtocolError, IndexError) as exc:
            raise GroupFailure(ErrorCode.GROUP_ID_NOT_FOUND,
                               f"Cannot upgrade the classic group {group_id}: {exc}.") from None
        self.classic.hand_over(group_id)
        gen = classic.generation
        group = self.groups[group_id] = ConsumerGroup(group_id, epoch=gen, assignment_epoch=gen,
                                                      assignor=self.settings.assignors[0])
        for m, sub, assigned in parsed:
            member = ConsumerMember(m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host,
                                    m.rebalance_timeout_ms, tuple(sorted(set(sub.topics))), epoch=gen,
                                    previous_epoch=gen, classic=ClassicProtocol(m.session_timeout_ms, m.protocols))
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            group.target[member.member_id] = _copy(assigned)
            self._set_assignment(group, member, assigned, {})
            self._touch(group, member)
        group.partition_counts = self._partition_counts(group)
        log.info("classic group %s upgraded to a consumer group at epoch %d (%d members)",
                 group_id, gen, len(group.members))
        return group

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """The last consumer-protocol member left a group of classic members: the classic
        coordinator takes the group back (Kafka's ClassicGroup.fromConsumerGroup), each member
        holding its target assignment, and rebalances it."""
        members = list(group.members.values())
        if not members or any(m.classic is None for m in members) or not self.settings.downgrade:
            return
        del self.groups[group.group_id]
        classic = Group(group.group_id, GroupState.STABLE, group.epoch, CONSUMER_PROTOCOL)
        for m in members:
            self._cancel_timers(m)
            assert m.classic is not None
            classic.members[m.member_id] = Member(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                m.rebalance_timeout_ms, CONSUMER_PROTOCOL, m.classic.protocols,
                assignment=m.classic.encode(group.target.get(m.member_id, {})))
            if m.instance_id is not None:
                classic.static_members[m.instance_id] = m.member_id
        self.classic.take_over(classic)
        log.info("consumer group %s downgraded to a classic group (%d members)", group.group_id, len(members))

    # ------------------------------------------------------------------ classic members of a consumer group
    def classic_join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str,
                     client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                     protocol_type: str, protocols: list[tuple[str, bytes]],
                     require_known_member_id: bool) -> JoinResult:
        """JoinGroup from a classic member (Kafka's classicGroupJoinToConsumerGroup): answered at
        once, with the member's epoch as generation and no leader (the broker assigns)."""
        group = self.groups[group_id]
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise GroupError(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if protocol_type != CONSUMER_PROTOCOL or not protocols:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        try:
            sub = parse_subscription(protocols[0][1])
        except ConsumerProtocolError:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id) from None
        unknown = not member_id
        if unknown:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and instance_id is None:
                raise GroupError(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        offered = {name for name, _ in protocols}
        if any(m.classic is not None and m.member_id != member_id and not offered & {n for n, _ in m.classic.protocols}
               for m in group.members.values()):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)  # no assignor in common
        member, joined = self._classic_member_for(group, member_id, instance_id, unknown)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has none
            rebalance_timeout_ms = session_timeout_ms
        if member.classic is not None and member.classic.deadline is not None:
            member.classic.deadline.cancel()
        member.classic = ClassicProtocol(session_timeout_ms, protocols)
        member.rack_id = sub.rack_id or member.rack_id
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.server_assignor = None
        member.client_id, member.client_host = client_id, client_host
        names = tuple(sorted(set(sub.topics)))
        changed = names != member.subscribed_topic_names
        member.subscribed_topic_names = names
        if joined:
            group.members[member_id] = member
            if instance_id is not None:
                group.static_members[instance_id] = member_id
        counts = self._partition_counts(group)
        if changed or counts != group.partition_counts:
            group.partition_counts = counts
            group.epoch += 1
            log.info("consumer group %s: epoch %d (classic member %s joined or changed)",
                     group_id, group.epoch, member_id)
        if group.epoch > group.assignment_epoch:
            self._compute_target(group)
        self._reconcile(group, member, sub.owned)
        self._touch(group, member)
        member.classic.deadline = self._later(rebalance_timeout_ms / 1000, self._classic_deadline_expired,
                                              group, member, "SyncGroup")
        return JoinResult(ErrorCode.NONE, member.epoch, CONSUMER_PROTOCOL, member.classic.protocol_name, "",
                          member_id, [])

    def _classic_member_for(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                            unknown: bool) -> tuple[ConsumerMember, bool]:
        if instance_id is not None:
            existing_id = group.static_members.get(instance_id)
            if existing_id is None:
                return ConsumerMember(member_id, instance_id), True
            if unknown:  # a static member restarted: the new incarnation takes the old one's place
                return self._replace_static(group, group.members[existing_id], member_id), False
            if existing_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None:
            return ConsumerMember(member_id, instance_id), True
        if member.classic is None:  # a consumer-protocol member does not speak JoinGroup
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        return member, False

    def _classic_member(self, group_id: str, member_id: str,
                        instance_id: str | None) -> tuple[ConsumerGroup, ConsumerMember, ClassicProtocol]:
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member_id and known != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
            member_id = known
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return group, member, member.classic

    def classic_sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                     protocol_type: str | None, protocol_name: str | None) -> tuple[str, str, bytes]:
        """SyncGroup from a classic member: (protocol type, protocol name, its assignment)."""
        group, member, classic = self._classic_member(group_id, member_id, instance_id)
        if generation != member.epoch:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL) or \
                (protocol_name is not None and protocol_name != classic.protocol_name):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.epoch > member.epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._owe_join(group, member, classic)
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        if classic.deadline is not None:
            classic.deadline.cancel()
            classic.deadline = None
        self._touch(group, member)
        return CONSUMER_PROTOCOL, classic.protocol_name, classic.encode(member.assigned)

    def classic_heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """Heartbeat from a classic member: REBALANCE_IN_PROGRESS when it must rejoin to move on."""
        try:
            group, member, classic = self._classic_member(group_id, member_id, instance_id)
        except GroupError as exc:
            return exc.code
        if generation != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(group, member)
        if member.epoch < group.epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not self._waits_for_others(group, member)):
            self._owe_join(group, member, classic)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, member_id: str, instance_id: str | None) -> ErrorCode:
        try:
            group, member, _ = self._classic_member(group_id, member_id, instance_id)
        except GroupError as exc:
            return exc.code
        self._fence(group, member, "left the group (LeaveGroup)")
        return ErrorCode.NONE

    def _owe_join(self, group: ConsumerGroup, member: ConsumerMember, classic: ClassicProtocol) -> None:
        """The member was told to rejoin: it must within its rebalance timeout."""
        if classic.deadline is None:
            classic.deadline = self._later(member.rebalance_timeout_ms / 1000, self._classic_deadline_expired,
                                           group, member, "JoinGroup")

    def _classic_deadline_expired(self, group: ConsumerGroup, member: ConsumerMember, owed: str) -> None:
        if member.classic is not None:
            member.classic.deadline = None
        if self.groups.get(group.group_id) is group and group.members.get(member.member_id) is member:
            self._fence(group, member, f"was fenced: no {owed} within its rebalance timeout "
                                       f"({member.rebalance_timeout_ms} ms)")

    @staticmethod
    def _waits_for_others(group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still held by another member."""
        mid = member.member_id
        return any(group.owners.get((t, p), mid) != mid
                   for t, ps in group.target.get(mid, {}).items() for p in ps)

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """(the member, whether it is new to the group)."""
        member_id = req.member_id or str(uuid.uuid4())  # v0: the coordinator names members
        if req.instance_id is not None:
            existing_id = group.static_members.get(req.instance_id)
            existing = group.members.get(existing_id) if existing_id is not None else None
            if req.member_epoch == 0:
                if existing is None:
                    return ConsumerMember(member_id, req.instance_id), True
                if existing.member_id == member_id:
                    self._restart(group, existing)
                    return existing, False
                if existing.epoch != STATIC_LEAVE_EPOCH:
                    raise GroupFailure(ErrorCode.UNRELEASED_INSTANCE_ID,
                                       f"Static member {member_id} with instance id {req.instance_id} cannot join "
                                       f"the group because the instance id is owned by {existing.member_id}.")
                return self._replace_static(group, existing, member_id), False
            if existing is None:
                raise GroupFailure(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if existing.member_id != member_id:
                raise GroupFailure(ErrorCode.FENCED_INSTANCE_ID,
                                   f"Static member {member_id} with instance id {req.instance_id} was fenced "
                                   f"by member {existing.member_id}.")
            self._check_epoch(existing, req)
            return existing, False
        member = group.members.get(member_id)
        if req.member_epoch == 0:
            if member is None:
                return ConsumerMember(member_id, None), True
            self._restart(group, member)
            return member, False
        if member is None:
            raise GroupFailure(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {group.group_id}.")
        self._check_epoch(member, req)
        return member, False

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
        received = req.member_epoch
        if received > member.epoch:
            raise GroupFailure(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a greater member epoch ({received}) than the one "
                               f"known by the group coordinator ({member.epoch}). The member must abandon all "
                               f"its partitions and rejoin.")
        if received < member.epoch and (received != member.previous_epoch
                                        or not _is_subset(req.owned, member.assigned)):
            # the previous epoch with a subset of the assignment: the reply that bumped it was lost
            raise GroupFailure(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch ({received}) than the one "
                               f"known by the group coordinator ({member.epoch}). The member must abandon all "
                               f"its partitions and rejoin.")

    def _restart(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A member rejoining with epoch 0 has dropped its partitions: release them."""
        self._set_assignment(group, member, {}, {})
        member.epoch, member.previous_epoch, member.state = 0, -1, MemberState.STABLE
        self._cancel_rebalance_timer(member)

    def _replace_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member back within its session: the new incarnation takes over the old one's
        partitions and target under its new id, without a new group epoch."""
        self._cancel_timers(old)
        new = ConsumerMember(member_id, old.instance_id, old.rack_id, old.client_id, old.client_host,
                             old.rebalance_timeout_ms, old.subscribed_topic_names, old.subscribed_topic_regex,
                             old.server_assignor, epoch=0, previous_epoch=0, assigned=_copy(old.assigned))
        del group.members[old.member_id]
        group.members[member_id] = new
        assert old.instance_id is not None
        group.static_members[old.instance_id] = member_id
        if old.member_id in group.target:
            group.target[member_id] = group.target.pop(old.member_id)
        for tp, owner in group.owners.items():
            if owner == old.member_id:
                group.owners[tp] = member_id
        log.info("consumer group %s: static member %s rejoined as %s", group.group_id, old.instance_id, member_id)
        return new

    @staticmethod
    def _update_member(member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply what the heartbeat changed; whether the subscription changed."""
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        member.client_id, member.client_host = req.client_id, req.client_host
        changed = False
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            changed = names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None  # "" clears it
            changed = changed or regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        return changed

    # ------------------------------------------------------------------ leaving and fencing
    def _leave(self, req: HeartbeatRequest) -> HeartbeatReply:
        group = self.groups.get(req.group_id)
        if group is None:
            raise GroupFailure(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        interval = self.settings.heartbeat_interval_ms
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise GroupFailure(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {req.member_id} is not a member of group {req.group_id}.")
            self._fence(group, member, "left the group")
            return HeartbeatReply(req.member_id, req.member_epoch, interval, None)
        existing_id = group.static_members.get(req.instance_id)
        member = group.members.get(existing_id) if existing_id is not None else None
        if member is None:
            raise GroupFailure(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise GroupFailure(ErrorCode.FENCED_INSTANCE_ID,
                               f"Static member {req.member_id} with instance id {req.instance_id} was fenced by "
                               f"member {member.member_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # gone for now: its partitions wait for it until its session timeout
            member.epoch = STATIC_LEAVE_EPOCH
            self._set_assignment(group, member, member.assigned, {})
            self._cancel_rebalance_timer(member)
            log.info("consumer group %s: static member %s left for now", group.group_id, req.instance_id)
            return HeartbeatReply(member.member_id, STATIC_LEAVE_EPOCH, interval, None)
        self._fence(group, member, "left the group")
        return HeartbeatReply(req.member_id, req.member_epoch, interval, None)

    def _fence(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        """Remove the member; its partitions are free for the others at the next group epoch."""
        self._cancel_timers(member)
        self._set_assignment(group, member, {}, {})
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        group.epoch += 1
        group.partition_counts = self._partition_counts(group)
        log.info("consumer group %s: member %s %s; epoch %d", group.group_id, member.member_id, why, group.epoch)
        if not group.members:
            group.target.clear()
        elif member.classic is None:
            self._maybe_downgrade(group)

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout_ms = member.classic.session_timeout_ms if member.classic else self.settings.session_timeout_ms
        member.session_timer = self._later(timeout_ms / 1000, self._session_expired, group, member)

    def _session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if self.groups.get(group.group_id) is group and group.members.get(member.member_id) is member:
            self._fence(group, member, "was fenced: its session expired")

    def _rebalance_expired(self, group: ConsumerGroup, member: ConsumerMember, epoch: int) -> None:
        member.rebalance_timer = None
        if (self.groups.get(group.group_id) is group and group.members.get(member.member_id) is member
                and member.epoch == epoch and member.state is MemberState.UNREVOKED_PARTITIONS):
            self._fence(group, member, f"was fenced: it kept revoked partitions past its "
                                       f"rebalance timeout ({member.rebalance_timeout_ms} ms)")

    def _cancel_rebalance_timer(self, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    def _cancel_timers(self, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None
        if member.classic is not None and member.classic.deadline is not None:
            member.classic.deadline.cancel()
            member.classic.deadline = None
        self._cancel_rebalance_timer(member)

    # ------------------------------------------------------------------ assignment
    def _subscribed_topics(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self._regex_topics(group, member.subscribed_topic_regex)
        return frozenset(names)

    def _regex_topics(self, group: ConsumerGroup, regex: str) -> frozenset[str]:
        now = time.monotonic()
        cached = group.regex_topics.get(regex)
        if cached is not None and now - cached[0] < REGEX_REFRESH_S:
            return cached[1]
        pattern = _compile_regex(regex)
        matched = frozenset(t for t in self.topics() if pattern.fullmatch(t))
        group.regex_topics[regex] = (now, matched)
        return matched

    def _partition_counts(self, group: ConsumerGroup) -> dict[str, int]:
        wanted: set[str] = set()
        for m in group.members.values():
            wanted |= self._subscribed_topics(group, m)
        live = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        for regex in [r for r in group.regex_topics if r not in live]:
            del group.regex_topics[regex]
        counts = {}
        for topic in wanted:
            n = self.partition_count(topic)
            if n:
                counts[topic] = n
        return counts

    def _compute_target(self, group: ConsumerGroup) -> None:
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        group.assignor = max(votes, key=lambda n: votes[n]) if votes else self.settings.assignors[0]
        specs = [MemberSpec(m.member_id, m.instance_id,
                            frozenset(t for t in self._subscribed_topics(group, m) if t in group.partition_counts),
                            {t: frozenset(ps) for t, ps in group.target.get(m.member_id, {}).items()})
                 for m in group.members.values()]
        group.target = ASSIGNORS[group.assignor].assign(specs, group.partition_counts)
        group.assignment_epoch = group.epoch

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        """Move the member one step towards its target (Kafka's CurrentAssignmentBuilder)."""
        if member.state is MemberState.STABLE:
            if member.epoch != group.assignment_epoch:
                self._next_assignment(group, member, member.epoch, owned)
        elif member.state is MemberState.UNREVOKED_PARTITIONS:
            if not _owns_any(owned, member.pending_revocation):
                self._next_assignment(group, member, member.epoch + 1, owned)
        else:
            self._next_assignment(group, member, member.epoch, owned)

    def _next_assignment(self, group: ConsumerGroup, member: ConsumerMember, epoch: int,
                         owned: Assignment | None) -> None:
        target = group.target.get(member.member_id, {})
        keep: Assignment = {}
        revoke: Assignment = {}
        add: Assignment = {}
        unreleased = False
        for topic in set(target) | set(member.assigned):
            wanted, current = target.get(topic, set()), member.assigned.get(topic, set())
            if kept := current & wanted:
                keep[topic] = kept
            if gone := current - wanted:
                revoke[topic] = gone
            new = {p for p in wanted - current if group.owners.get((topic, p), member.member_id) == member.member_id}
            unreleased = unreleased or len(new) < len(wanted - current)
            if new:
                add[topic] = new
        if revoke and _owns_any(owned, revoke):
            self._set_epoch(member, epoch)
            member.state = MemberState.UNREVOKED_PARTITIONS
            self._set_assignment(group, member, keep, revoke)
            self._cancel_rebalance_timer(member)
            member.rebalance_timer = self._later(member.rebalance_timeout_ms / 1000, self._rebalance_expired,
                                                 group, member, member.epoch)
            return
        for topic, parts in add.items():
            keep.setdefault(topic, set()).update(parts)
        self._set_epoch(member, group.assignment_epoch)
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        self._set_assignment(group, member, keep, {})
        self._cancel_rebalance_timer(member)

    @staticmethod
    def _set_epoch(member: ConsumerMember, epoch: int) -> None:
        if epoch != member.epoch:
            member.previous_epoch, member.epoch = member.epoch, epoch

    @staticmethod
    def _set_assignment(group: ConsumerGroup, member: ConsumerMember, assigned: Assignment,
                        pending: Assignment) -> None:
        """Record what the member holds (assigned, and revoked but not yet released)."""
        mid = member.member_id
        for held in (member.assigned, member.pending_revocation):
            for topic, parts in held.items():
                for p in parts:
                    if group.owners.get((topic, p)) == mid:
                        del group.owners[topic, p]
        member.assigned = {t: set(ps) for t, ps in assigned.items() if ps}
        member.pending_revocation = {t: set(ps) for t, ps in pending.items() if ps}
        for held in (member.assigned, member.pending_revocation):
            for topic, parts in held.items():
                for p in parts:
                    group.owners[topic, p] = mid

    # ------------------------------------------------------------------ offsets
    def validate_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int,
                        *, transactional: bool = False) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit; None when the group is not a consumer
        group (the classic coordinator decides)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member commits with its generation
            return ErrorCode.NONE if member_epoch == member.epoch else ErrorCode.ILLEGAL_GENERATION
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION  # a KIP-848 member commits with v9+
        if member_epoch != member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9 names the member)."""
        group = self.groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


def _compile_regex(regex: str) -> Any:
    """A subscription regex (RE2 syntax, as Kafka's), or INVALID_REGULAR_EXPRESSION."""
    pattern = _REGEXES.get(regex)
    if pattern is None:
        try:
            pattern = re2.compile(regex, _RE2_OPTIONS)
        except re2.error as exc:
            raise GroupFailure(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.") from None
        if len(_REGEXES) > 1000:
            _REGEXES.clear()
        _REGEXES[regex] = pattern
    return pattern


_REGEXES: dict[str, Any] = {}  # compiled RE2 patterns by source


def _copy(assignment: Mapping[str, set[int]]) -> Assignment:
    return {t: set(ps) for t, ps in assignment.items()}


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still holds any of ``partitions`` (not reporting: assume it does)."""
    if owned is None:
        return True
    return any(owned.get(t, set()) & ps for t, ps in partitions.items())


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items() if ps)
