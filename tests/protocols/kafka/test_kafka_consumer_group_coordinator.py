"""The KIP-848 coordinator and assignors without sockets: reconciliation steps, epoch
fencing and timeouts on a fake clock (the live-client behaviour is in
test_kafka_consumer_groups.py)."""

from __future__ import annotations

import pytest

from rocketport.protocols.kafka.assignors import MemberSpec, RangeAssignor, UniformAssignor
from rocketport.protocols.kafka.consumer_groups import (
    ConsumerGroupCoordinator,
    ConsumerGroupSettings,
    GroupFailure,
    HeartbeatRequest,
    MemberState,
)
from rocketport.protocols.kafka.coordinator import GroupCoordinator
from rocketport.protocols.kafka.errors import ErrorCode
from tests.support.fake_time import FakeTime

TOPICS = {"t": 4, "u": 4}


def coordinator(clock: FakeTime, **settings) -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(GroupCoordinator(clock.call_later), lambda: sorted(TOPICS), TOPICS.get,
                                    ConsumerGroupSettings(**settings), clock.call_later)


def hb(member: str, epoch: int, owned: dict | None = None, *, topics=("t",), regex=None,
       instance=None, assignor=None) -> HeartbeatRequest:
    joining = epoch == 0
    return HeartbeatRequest("g", member, epoch, instance, None, 10_000 if joining else -1,
                            list(topics) if joining or topics != ("t",) else None, regex, assignor,
                            ({} if joining else owned), "client", "127.0.0.1", 1)


def total(assignment: dict | None) -> int:
    return sum(len(p) for p in (assignment or {}).values())


def test_a_partition_reaches_its_new_owner_only_after_the_old_one_revoked_it():
    clock = FakeTime()
    coord = coordinator(clock)
    a = coord.heartbeat(hb("a", 0))
    assert (a.member_epoch, a.assignment) == (1, {"t": {0, 1, 2, 3}})
    b = coord.heartbeat(hb("b", 0))
    assert b.member_epoch == 2 and total(b.assignment) == 0  # a still holds all four
    a = coord.heartbeat(hb("a", 1, {"t": {0, 1, 2, 3}}))
    assert a.member_epoch == 1 and total(a.assignment) == 2  # revoke two, keep its epoch
    assert coord.groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    b = coord.heartbeat(hb("b", 2, {}))
    assert total(b.assignment) == 0 and coord.groups["g"].members["b"].state is MemberState.UNRELEASED_PARTITIONS
    kept = a.assignment
    a = coord.heartbeat(hb("a", 1, kept))  # it no longer lists them: revoked
    assert a.member_epoch == 2 and a.assignment is None  # same partitions: not sent again
    b = coord.heartbeat(hb("b", 2, {}))
    assert total(b.assignment) == 2 and not b.assignment["t"] & kept["t"]
    assert coord.groups["g"].state == "Stable"


def test_member_epochs_fence_zombies():
    clock = FakeTime()
    coord = coordinator(clock)
    coord.heartbeat(hb("a", 0))
    with pytest.raises(GroupFailure) as ahead:
        coord.heartbeat(hb("a", 5, {}))
    assert ahead.value.code is ErrorCode.FENCED_MEMBER_EPOCH
    coord.heartbeat(hb("b", 0))
    coord.heartbeat(hb("a", 1, {"t": {0, 1, 2, 3}}))
    coord.heartbeat(hb("a", 1, {"t": {0, 1}}))  # revoked two: epoch 2
    assert coord.groups["g"].members["a"].epoch == 2
    coord.heartbeat(hb("a", 1, {"t": {0, 1}}))  # the previous epoch, a subset: the reply was lost
    with pytest.raises(GroupFailure) as stale:
        coord.heartbeat(hb("a", 1, {"t": {0, 1, 2}}))  # the previous epoch with more than it has
    assert stale.value.code is ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(GroupFailure) as unknown:
        coord.heartbeat(hb("nobody", 3, {}))
    assert unknown.value.code is ErrorCode.UNKNOWN_MEMBER_ID
    assert coord.validate_commit("g", "a", 1, 9) is ErrorCode.STALE_MEMBER_EPOCH
    assert coord.validate_commit("g", "a", 2, 9) is ErrorCode.NONE
    assert coord.validate_commit("other", "a", 2, 9) is None  # not a consumer group


def test_session_and_rebalance_timeouts_fence_on_time():
    clock = FakeTime()
    coord = coordinator(clock, session_timeout_ms=3000)
    coord.heartbeat(hb("a", 0))
    coord.heartbeat(hb("b", 0))
    coord.heartbeat(hb("a", 1, {"t": {0, 1, 2, 3}}))  # told to revoke two; its rebalance timeout is 10 s
    for step in (2.5, 2.5, 2.5, 2.499):  # both stay alive; a never gives the partitions up
        clock.advance(step)
        coord.heartbeat(hb("b", 2, {}))
        coord.heartbeat(hb("a", 1, {"t": {0, 1, 2, 3}}))
    assert "a" in coord.groups["g"].members  # 10 s: not a millisecond early
    clock.advance(0.001)
    assert "a" not in coord.groups["g"].members
    assert total(coord.heartbeat(hb("b", 2, {})).assignment) == 4
    clock.advance(3.0)  # b silent for its session
    assert not coord.groups["g"].members and coord.groups["g"].state == "Empty"


def test_static_member_returns_to_its_partitions():
    clock = FakeTime()
    coord = coordinator(clock)
    coord.heartbeat(hb("a1", 0, instance="i-a"))
    coord.heartbeat(hb("b", 0))
    kept = coord.heartbeat(hb("a1", 1, {"t": {0, 1, 2, 3}}, instance="i-a")).assignment
    coord.heartbeat(hb("a1", 1, kept, instance="i-a"))
    coord.heartbeat(hb("b", 2, {}))
    epoch = coord.groups["g"].epoch
    with pytest.raises(GroupFailure) as taken:  # i-a is live: no one else may claim it
        coord.heartbeat(hb("x", 0, instance="i-a"))
    assert taken.value.code is ErrorCode.UNRELEASED_INSTANCE_ID
    assert coord.heartbeat(hb("a1", -2, instance="i-a")).member_epoch == -2
    assert coord.heartbeat(hb("b", 2, {"t": {2, 3}})).assignment is None  # nothing new: a1's partitions wait for it
    back = coord.heartbeat(hb("a2", 0, instance="i-a"))
    assert back.assignment == kept and coord.groups["g"].static_members["i-a"] == "a2"
    assert coord.groups["g"].epoch == epoch  # no rebalance


def test_uniform_is_balanced_and_sticky():
    uniform = UniformAssignor()
    members = [MemberSpec(m, None, frozenset({"t"}), {}) for m in ("a", "b")]
    first = uniform.assign(members, {"t": 6})
    assert sorted(len(a["t"]) for a in first.values()) == [3, 3]
    grown = [MemberSpec(m, None, frozenset({"t"}), {t: frozenset(p) for t, p in first[m].items()})
             for m in ("a", "b")] + [MemberSpec("c", None, frozenset({"t"}), {})]
    second = uniform.assign(grown, {"t": 6})
    assert sorted(len(a.get("t", ())) for a in second.values()) == [2, 2, 2]
    assert second["a"]["t"] <= first["a"]["t"] and second["b"]["t"] <= first["b"]["t"]  # only moves to c
    held = {"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7, 8}, "d": set()}  # 10 partitions, 4 members
    spread = uniform.assign([MemberSpec(m, None, frozenset({"t"}), {"t": frozenset(p)}) for m, p in held.items()],
                            {"t": 10})
    assert sorted(len(a["t"]) for a in spread.values()) == [2, 2, 3, 3]  # floor or ceil, never 1 and 3
    assert all(spread[m]["t"] <= held[m] for m in "abc")
    mixed = uniform.assign([MemberSpec("a", None, frozenset({"t"}), {}),
                            MemberSpec("b", None, frozenset({"t", "u"}), {})], {"t": 2, "u": 2})
    assert mixed["a"] == {"t": {0, 1}} and mixed["b"] == {"u": {0, 1}}


def test_range_co_partitions():
    out = RangeAssignor().assign([MemberSpec(m, None, frozenset({"t", "u"}), {}) for m in ("b", "a")],
                                 {"t": 3, "u": 3})
    assert out == {"a": {"t": {0, 1}, "u": {0, 1}}, "b": {"t": {2}, "u": {2}}}


def test_bad_heartbeats_get_kafka_errors():
    clock = FakeTime()
    coord = coordinator(clock)
    cases = [
        (hb("", 0), ErrorCode.INVALID_REQUEST),  # v1: the client names itself
        (hb("a", -3), ErrorCode.INVALID_REQUEST),
        (hb("a", 0, assignor="sticky"), ErrorCode.UNSUPPORTED_ASSIGNOR),
        (hb("a", 0, topics=(), regex="(?=x)t"), ErrorCode.INVALID_REGULAR_EXPRESSION),  # RE2 has no lookahead
        (hb("a", 0, topics=(), regex="t("), ErrorCode.INVALID_REGULAR_EXPRESSION),
        (hb("a", 0, topics=()), ErrorCode.INVALID_REQUEST),  # nothing subscribed
        (hb("a", -1), ErrorCode.GROUP_ID_NOT_FOUND),  # leaving a group that does not exist
    ]
    for request, code in cases:
        with pytest.raises(GroupFailure) as failure:
            coord.heartbeat(request)
        assert failure.value.code is code, request
    joined = coord.heartbeat(hb("a", 0, topics=(), regex="t|u"))
    assert joined.assignment == {"t": {0, 1, 2, 3}, "u": {0, 1, 2, 3}}


def test_regexes_are_re2_and_cannot_stall_the_broker():
    """RE2 matches in linear time: a pattern that backtracks exponentially in Python's re
    over a long topic name is answered at once (with re this test would never end)."""
    topics = {"a" * 120 + "c": 1, "t": 1}
    clock = FakeTime()
    coord = ConsumerGroupCoordinator(GroupCoordinator(clock.call_later), lambda: sorted(topics), topics.get,
                                     call_later=clock.call_later)
    joined = coord.heartbeat(hb("a", 0, topics=(), regex="(a+)+b|t"))
    assert joined.assignment == {"t": {0}}
    assert coord.heartbeat(hb("b", 0, topics=(), regex="[[:alpha:]]+")).member_epoch > 0  # RE2's own classes
    coord.close()
