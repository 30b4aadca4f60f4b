"""Kafka's classic consumer-group protocol: membership, generations and rebalances.

Members join (JoinGroup), one of them, the leader, computes the assignment from everyone's
subscription metadata, SyncGroup hands each member its part, and heartbeats keep members
alive. Assignments and subscriptions are carried opaquely: the broker never interprets
range, roundrobin or sticky plans, exactly like Kafka's own coordinator.

Rebalances finish as soon as every known member has rejoined (no initial delay): the group
is never held longer than needed, and the rebalance timeout only evicts members that do not
come back. Static members (``group.instance.id``) keep their place across restarts: a
static member rejoining with unchanged metadata gets its previous assignment without a
rebalance.

A group whose members use the embedded consumer protocol can move to KIP-848's consumer
protocol while it runs and back (``consumer_groups.py`` decides; :meth:`hand_over` and
:meth:`take_over` move it). State lives in memory only (as Kafka's coordinator rebuilds it
from its log, a restarted broker's members simply rejoin); committed offsets go through the
Broker facade, not here.
Timers are the event loop's own TimerHandles, all cancelled by :meth:`close`. This module
never touches sockets or the codec.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .errors import ErrorCode


class Timer(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[..., Timer]  # (delay_s, callback, *args), as loop.call_later


def schedule(call_later: CallLater | None, delay_s: float, callback: Callable[..., object], *args: Any) -> Timer:
    """A group timer through ``call_later`` (a test's fake), else the running loop's."""
    return (call_later or asyncio.get_running_loop().call_later)(delay_s, callback, *args)


MIN_SESSION_TIMEOUT_MS: Final = 1000
MAX_SESSION_TIMEOUT_MS: Final = 30 * 60 * 1000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


class GroupError(Exception):
    """A request the group cannot accept; carries the Kafka code to answer with."""

    def __init__(self, code: ErrorCode, member_id: str = "") -> None:
        super().__init__(code.name)
        self.code = code
        self.member_id = member_id


@dataclass(slots=True)
class JoinResult:
    error_code: ErrorCode
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[dict[str, Any]]


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: asyncio.Future | None = None
    sync_waiter: asyncio.Future | None = None
    session_timer: Timer | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending: dict[str, Timer] = field(default_factory=dict)  # MEMBER_ID_REQUIRED
    rebalance_timer: Timer | None = None


class GroupCoordinator:
    """Every consumer group of this broker (which is the coordinator of all of them)."""

    def __init__(self, call_later: CallLater | None = None) -> None:
        """``call_later`` schedules the session, join and rebalance timeouts: the running
        loop's by default; tests pass a fake one and move time on themselves."""
        self.groups: dict[str, Group] = {}
        self._call_later = call_later

    def _later(self, delay_s: float, callback: Callable[..., object], *args: Any) -> Timer:
        return schedule(self._call_later, delay_s, callback, *args)

    def close(self) -> None:
        """Cancel every timer and fail every waiter: the front-end is stopping."""
        for group in self.groups.values():
            if group.rebalance_timer:
                group.rebalance_timer.cancel()
            for handle in group.pending.values():
                handle.cancel()
            for m in group.members.values():
                if m.session_timer:
                    m.session_timer.cancel()
                for waiter in (m.join_waiter, m.sync_waiter):
                    if waiter is not None and not waiter.done():
                        waiter.set_exception(GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        self.groups.clear()

    # ------------------------------------------------------------------ JoinGroup
    async def join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                   protocol_type: str, protocols: list[tuple[str, bytes]],
                   require_known_member_id: bool) -> JoinResult:
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise GroupError(ErrorCode.INVALID_SESSION_TIMEOUT)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if group.members and (protocol_type != group.protocol_type or not self._common_protocols(group, protocols)):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        if not member_id:
            if instance_id is not None and instance_id in group.static_members:
                return await self._rejoin_static(group, instance_id, client_id, client_host,
                                                 session_timeout_ms, rebalance_timeout_ms,
                                                 protocol_type, protocols)
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and instance_id is None:
                # KIP-394: the member learns its id first, and only a rejoin with it counts.
                group.pending[new_id] = self._later(session_timeout_ms / 1000,
                                                    self._expire_pending, group, new_id)
                raise GroupError(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            member = self._add_member(group, new_id, instance_id, client_id, client_host,
                                      session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
            return await self._await_join(group, member)

        member = group.members.get(member_id)
        if member is None:
            handle = group.pending.pop(member_id, None)
            if handle is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            handle.cancel()
            member = self._add_member(group, member_id, instance_id, client_id, client_host,
                                      session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
            return await self._await_join(group, member)
        if instance_id is not None and group.static_members.get(instance_id) != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return await self._await_join(group, member)
        if not changed and (group.state is GroupState.COMPLETING_REBALANCE or
                            (group.state is GroupState.STABLE and member_id != group.leader_id)):
            # A repeated, unchanged join (a retry) learns the current generation again; only
            # the leader of a stable group rejoins to make the group rebalance (Kafka's rule).
            self._touch(group, member)
            return self._join_result(group, member)
        self._prepare_rebalance(group)
        return await self._await_join(group, member)

    async def _rejoin_static(self, group: Group, instance_id: str, client_id: str, client_host: str,
                             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]]) -> JoinResult:
        """A restarted static member replaces its old incarnation (which is now fenced)."""
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        self._drop_timers(old, ErrorCode.FENCED_INSTANCE_ID)
        new_id = f"{client_id or instance_id}-{uuid.uuid4()}"
        member = Member(new_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocol_type, protocols, assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if group.state is GroupState.STABLE and old.protocols == protocols and group.leader_id != new_id:
            self._touch(group, member)
            return self._join_result(group, member)
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group)
        return await self._await_join(group, member)

    def _add_member(self, group: Group, member_id: str, instance_id: str | None, client_id: str,
                    client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                    protocol_type: str, protocols: list[tuple[str, bytes]]) -> Member:
        member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, protocol_type, protocols)
        if not group.members:
            group.protocol_type = protocol_type
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group)
        return member

    async def _await_join(self, group: Group, member: Member) -> JoinResult:
        if member.join_waiter is not None and not member.join_waiter.done():
            # a duplicate join replaces the earlier one, which must rejoin
            member.join_waiter.set_exception(GroupError(ErrorCode.REBALANCE_IN_PROGRESS))
        waiter = member.join_waiter = asyncio.get_running_loop().create_future()
        if member.session_timer:  # while it waits the rebalance timeout bounds it, not the session
            member.session_timer.cancel()
            member.session_timer = None
        self._maybe_complete_join(group)
        return await waiter

    def _prepare_rebalance(self, group: Group) -> None:
        """Enter PreparingRebalance: members waiting in SyncGroup must rejoin."""
        for m in group.members.values():
            if m.sync_waiter is not None and not m.sync_waiter.done():
                m.sync_waiter.set_exception(GroupError(ErrorCode.REBALANCE_IN_PROGRESS))
            m.sync_waiter = None
        group.state = GroupState.PREPARING_REBALANCE
        if group.rebalance_timer:
            group.rebalance_timer.cancel()
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_timer = self._later(timeout / 1000, self._rebalance_timed_out, group)

    def _rebalance_timed_out(self, group: Group) -> None:
        """Members that did not rejoin within the rebalance timeout are removed."""
        group.rebalance_timer = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        for m in [m for m in group.members.values() if m.join_waiter is None or m.join_waiter.done()]:
            self._remove_member(group, m, ErrorCode.UNKNOWN_MEMBER_ID, rebalance=False)
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and all(
                m.join_waiter is not None and not m.join_waiter.done() for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_timer:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        group.generation += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = ""
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        for m in group.members.values():
            m.assignment = b""
            self._touch(group, m)
            waiter, m.join_waiter = m.join_waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(self._join_result(group, m))

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol_name or "")}
                       for m in group.members.values()]
        return JoinResult(ErrorCode.NONE, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id, member.member_id, members)

    @staticmethod
    def _common_protocols(group: Group, protocols: list[tuple[str, bytes]]) -> set[str]:
        common = {name for name, _ in protocols}
        for m in group.members.values():
            common &= {name for name, _ in m.protocols}
        return common

    @staticmethod
    def _select_protocol(group: Group) -> str:
        """Kafka's rule: among protocols every member supports, the one most members prefer."""
        common: set[str] | None = None
        for m in group.members.values():
            names = {name for name, _ in m.protocols}
            common = names if common is None else common & names
        candidates = common or set()
        votes: dict[str, int] = {}
        for m in group.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        if not votes:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        return max(votes, key=lambda name: votes[name])

    # ------------------------------------------------------------------ SyncGroup
    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   assignments: dict[str, bytes]) -> tuple[str | None, str | None, bytes]:
        """(protocol type, protocol name, this member's assignment)."""
        group, member = self._member(group_id, member_id, instance_id)
        if generation != group.generation:
            raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        if group.state is GroupState.PREPARING_REBALANCE:
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)
        self._touch(group, member)
        if group.state is GroupState.STABLE:
            return group.protocol_type, group.protocol_name, member.assignment
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
                waiter, m.sync_waiter = m.sync_waiter, None
                if waiter is not None and not waiter.done():
                    waiter.set_result(m.assignment)
            group.state = GroupState.STABLE
            return group.protocol_type, group.protocol_name, member.assignment
        waiter = member.sync_waiter = asyncio.get_running_loop().create_future()
        assignment = await waiter
        return group.protocol_type, group.protocol_name, assignment

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        try:
            group, member = self._member(group_id, member_id, instance_id)
        except GroupError as exc:
            return exc.code
        self._touch(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def leave(self, group_id: str, member_id: str, instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        member = group.members.get(member_id)
        if member is None:
            handle = group.pending.pop(member_id, None)
            if handle is not None:
                handle.cancel()
                return ErrorCode.NONE
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID, rebalance=True)
        return ErrorCode.NONE

    # ------------------------------------------------------------------ offsets and admin
    def validate_commit(self, group_id: str, generation: int, member_id: str,
                        instance_id: str | None, *, transactional: bool = False) -> ErrorCode:
        """Whether an OffsetCommit (or TxnOffsetCommit) may write, by Kafka's classic-group
        rule: generation -1 without membership stores offsets only while the group is Empty
        (or unknown: a simple consumer's group); anything naming a member or a generation
        must be that member, in this generation, and not while the group completes a
        rebalance. A zombie (revoked, left, expired) hears UNKNOWN_MEMBER_ID,
        ILLEGAL_GENERATION or FENCED_INSTANCE_ID and its offsets are not written."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if generation < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if generation >= 0 or member_id or instance_id is not None:
            try:
                group, member = self._member(group_id, member_id, instance_id)
            except GroupError as exc:
                return exc.code
            if generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
            self._touch(group, member)
        elif not transactional:
            return ErrorCode.UNKNOWN_MEMBER_ID  # no member named: only an Empty group takes it
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def forget(self, group_id: str) -> None:
        """Drop an empty group (a consumer-protocol group takes its id over)."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return
        if group.rebalance_timer:
            group.rebalance_timer.cancel()
        for handle in group.pending.values():
            handle.cancel()
        del self.groups[group_id]

    def hand_over(self, group_id: str) -> Group:
        """Give a running group up (online upgrade to the consumer protocol): members waiting
        in JoinGroup or SyncGroup hear REBALANCE_IN_PROGRESS and rejoin, now served by the
        consumer-group coordinator; every timer of the group is cancelled."""
        group = self.groups.pop(group_id)
        if group.rebalance_timer:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        for handle in group.pending.values():
            handle.cancel()
        group.pending.clear()
        for m in group.members.values():
            self._drop_timers(m, ErrorCode.REBALANCE_IN_PROGRESS)
        return group

    def take_over(self, group: Group) -> None:
        """Serve a group given back by the consumer-group coordinator (online downgrade): its
        members hold their last assignment, and a rebalance starts so that they rejoin and
        their leader assigns again."""
        self.groups[group.group_id] = group
        group.protocol_name = self._select_protocol(group)
        group.leader_id = next(iter(group.members))
        for m in group.members.values():
            self._touch(group, m)
        self._prepare_rebalance(group)

    # ------------------------------------------------------------------ internals
    def _member(self, group_id: str, member_id: str, instance_id: str | None) -> tuple[Group, Member]:
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if instance_id is not None and instance_id in group.static_members \
                and group.static_members[instance_id] != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return group, member

    def _touch(self, group: Group, member: Member) -> None:
        """Restart the member's session timer: it is alive."""
        if member.session_timer:
            member.session_timer.cancel()
        member.session_timer = self._later(member.session_timeout_ms / 1000, self._session_expired,
                                           group, member)

    def _session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is member:
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID, rebalance=True)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        group.pending.pop(member_id, None)

    def _drop_timers(self, member: Member, code: ErrorCode) -> None:
        if member.session_timer:
            member.session_timer.cancel()
            member.session_timer = None
        for waiter in (member.join_waiter, member.sync_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_exception(GroupError(code))
        member.join_waiter = member.sync_waiter = None

    def _remove_member(self, group: Group, member: Member, code: ErrorCode, *, rebalance: bool) -> None:
        self._drop_timers(member, code)
        del group.members[member.member_id]
        if member.group_instance_id is not None and \
                group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if not rebalance:
            return
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        elif group.members:
            self._prepare_rebalance(group)
            self._maybe_complete_join(group)
        else:
            if group.rebalance_timer:
                group.rebalance_timer.cancel()
                group.rebalance_timer = None
            group.generation += 1
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = ""
