"""Group coordinator rules, without sockets (asyncio only). (Producer state: tests/core/txn.)"""

from __future__ import annotations

import asyncio

import pytest
from rocketport.protocols.kafka.coordinator import (
    GroupCoordinator,
    GroupError,
    GroupState,
)
from rocketport.protocols.kafka.errors import ErrorCode
from tests.support.fake_time import FakeTime

PROTOCOLS = [("range", b"sub-a"), ("roundrobin", b"sub-b")]


async def join(coord: GroupCoordinator, member_id: str = "", *, instance: str | None = None,
               protocols=PROTOCOLS, session_ms: int = 6000, rebalance_ms: int = 2000, v4: bool = True):
    return await coord.join("g", member_id, instance, "client", "127.0.0.1", session_ms, rebalance_ms,
                            "consumer", protocols, require_known_member_id=v4)


async def join_v4(coord: GroupCoordinator, **kw):
    """The KIP-394 dance: learn a member id, rejoin with it."""
    with pytest.raises(GroupError) as exc:
        await join(coord, **kw)
    assert exc.value.code == ErrorCode.MEMBER_ID_REQUIRED
    return await join(coord, exc.value.member_id, **kw)


def test_member_id_required_then_generation_and_leader():
    async def scenario():
        coord = GroupCoordinator()
        r = await join_v4(coord)
        assert r.generation_id == 1 and r.leader == r.member_id and r.protocol_name == "range"
        assert [m["metadata"] for m in r.members] == [b"sub-a"]
        _, name, assignment = await coord.sync("g", 1, r.member_id, None, {r.member_id: b"plan"})
        assert (name, assignment) == ("range", b"plan")
        assert coord.groups["g"].state is GroupState.STABLE
        assert coord.heartbeat("g", 1, r.member_id, None) == ErrorCode.NONE
        assert coord.heartbeat("g", 0, r.member_id, None) == ErrorCode.ILLEGAL_GENERATION
        assert coord.heartbeat("g", 1, "stranger", None) == ErrorCode.UNKNOWN_MEMBER_ID
        with pytest.raises(GroupError) as exc:
            await join(coord, "stranger")
        assert exc.value.code == ErrorCode.UNKNOWN_MEMBER_ID
        coord.close()

    asyncio.run(scenario())


def test_second_member_triggers_prompt_rebalance():
    async def scenario():
        coord = GroupCoordinator()
        a = await join_v4(coord)
        await coord.sync("g", 1, a.member_id, None, {a.member_id: b"all"})
        b_task = asyncio.create_task(join(coord, v4=False))
        await asyncio.sleep(0)
        assert coord.heartbeat("g", 1, a.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
        a2 = await join(coord, a.member_id)  # the rejoin completes the rebalance at once
        b = await b_task
        assert a2.generation_id == b.generation_id == 2
        assert a2.leader == a.member_id and len(a2.members) == 2 and b.members == []
        again = await join(coord, a.member_id)  # a retried join while completing: no new rebalance
        assert again.generation_id == 2 and len(again.members) == 2
        b_sync = asyncio.create_task(coord.sync("g", 2, b.member_id, None, {}))
        await asyncio.sleep(0)
        await coord.sync("g", 2, a.member_id, None, {a.member_id: b"p0", b.member_id: b"p1"})
        assert (await b_sync)[2] == b"p1"
        # leaving hands everything back in a new generation
        assert coord.leave("g", b.member_id, None) == ErrorCode.NONE
        a3 = await join(coord, a.member_id)
        assert a3.generation_id == 3 and len(a3.members) == 1
        coord.close()

    asyncio.run(scenario())


def test_session_timeout_evicts_a_silent_member():
    async def scenario():
        clock = FakeTime()
        coord = GroupCoordinator(clock.call_later)
        a = await join_v4(coord, session_ms=1000)
        await coord.sync("g", 1, a.member_id, None, {})
        clock.advance(0.999)
        assert coord.groups["g"].state is GroupState.STABLE  # not a millisecond early
        clock.advance(0.001)
        assert coord.groups["g"].state is GroupState.EMPTY
        assert coord.heartbeat("g", 1, a.member_id, None) == ErrorCode.UNKNOWN_MEMBER_ID
        coord.close()

    asyncio.run(scenario())


def test_static_member_restart_keeps_assignment_without_rebalance():
    async def scenario():
        coord = GroupCoordinator()
        leader = await join(coord, instance="i-1")
        follower_task = asyncio.create_task(join(coord, instance="i-2"))
        await asyncio.sleep(0)
        leader = await join(coord, leader.member_id, instance="i-1")
        follower = await follower_task
        gen = leader.generation_id
        await coord.sync("g", gen, leader.member_id, "i-1",
                         {leader.member_id: b"L", follower.member_id: b"F"})
        restarted = await join(coord, instance="i-2")  # a new process, no member id yet
        assert restarted.generation_id == gen and restarted.member_id != follower.member_id
        assert (await coord.sync("g", gen, restarted.member_id, "i-2", {}))[2] == b"F"
        assert coord.heartbeat("g", gen, follower.member_id, "i-2") == ErrorCode.FENCED_INSTANCE_ID
        coord.close()

    asyncio.run(scenario())


def test_inconsistent_protocols_are_refused():
    async def scenario():
        coord = GroupCoordinator()
        await join_v4(coord)
        with pytest.raises(GroupError) as exc:
            await join(coord, protocols=[("cooperative-sticky", b"")])
        assert exc.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        coord.close()

    asyncio.run(scenario())

