"""ConsumerManager / ProducerManager: membership, subscriptions, expiry, closed channels."""

from __future__ import annotations

import pytest

from rocketport.common.tags import tags_code
from rocketport.core.consumer.clients import (
    ConsumerManager,
    ProducerManager,
    SubscriptionData,
)

G = "cg"
PUSH = "CONSUME_PASSIVELY"
LAST = "CONSUME_FROM_LAST_OFFSET"


class Channel:
    """Stands in for a front-end connection: hashable by identity, never touched."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Channel({self.name})"


def subs(*topics: str, version: int = 0) -> dict[str, SubscriptionData]:
    return {t: SubscriptionData(t, sub_version=version) for t in topics}


@pytest.fixture
def events() -> list[tuple[str, list[str]]]:
    return []


@pytest.fixture
def consumers(clock, events) -> ConsumerManager:
    manager = ConsumerManager(channel_expired_timeout_ms=120_000, clock=clock)
    manager.add_listener(lambda group, ids: events.append((group, ids)))
    return manager


def register(manager: ConsumerManager, client_id: str, channel: object, *topics: str,
             group: str = G, version: int = 0) -> bool:
    return manager.register(group, client_id, channel, PUSH, "CLUSTERING", LAST,
                            subs(*(topics or ("T",)), version=version))


def test_new_members_change_the_group_and_notify_sorted_ids(consumers, events):
    assert register(consumers, "c2", Channel("2")) is True
    assert register(consumers, "c1", Channel("1")) is True
    assert consumers.client_ids(G) == ["c1", "c2"]
    assert events == [(G, ["c2"]), (G, ["c1", "c2"])]
    info = consumers.group_info(G)
    assert info is not None and info.message_model == "CLUSTERING"
    assert info.consume_type == PUSH and info.consume_from_where == LAST


def test_repeated_heartbeat_is_not_a_change(consumers, events):
    channel = Channel("1")
    register(consumers, "c1", channel)
    events.clear()
    assert register(consumers, "c1", channel) is False
    assert events == []


def test_subscription_changes_follow_rocketmq(consumers, events):
    channel = Channel("1")
    register(consumers, "c1", channel, "T")
    events.clear()
    assert register(consumers, "c1", channel, "T", "U") is True  # topic added
    assert consumers.groups_subscribing("U") == [G]
    tagged = SubscriptionData.from_expression("T", "A || B", sub_version=5)
    assert consumers.register(G, "c1", channel, PUSH, "CLUSTERING", LAST,
                              {"T": tagged, "U": SubscriptionData("U")}) is False
    assert consumers.find_subscription(G, "T") is tagged  # newer version replaces quietly
    older = SubscriptionData.from_expression("T", "C", sub_version=4)
    consumers.register(G, "c1", channel, PUSH, "CLUSTERING", LAST,
                       {"T": older, "U": SubscriptionData("U")})
    assert consumers.find_subscription(G, "T") is tagged  # an older version is ignored
    assert register(consumers, "c1", channel, "U") is True  # topic dropped
    assert consumers.find_subscription(G, "T") is None
    assert consumers.groups_subscribing("T") == []
    assert len(events) == 2


def test_heartbeat_keeps_a_consumer_alive(consumers, clock):
    register(consumers, "c1", Channel("1"))
    assert consumers.heartbeat(G, "nobody") is False
    for _ in range(3):
        clock.advance(100_000)
        assert consumers.heartbeat(G, "c1") is True
        assert consumers.scan_expired() == []
    assert consumers.client_ids(G) == ["c1"]


def test_scan_expired_drops_silent_consumers_and_returns_their_channels(consumers, clock, events):
    old, fresh = Channel("old"), Channel("fresh")
    register(consumers, "c-old", old)
    clock.advance(60_000)
    register(consumers, "c-fresh", fresh)
    events.clear()
    clock.advance(60_000)  # c-old silent exactly 120 s: kept (strictly greater expires)
    assert consumers.scan_expired() == []
    clock.advance(1)
    assert consumers.scan_expired() == [(G, "c-old", old)]
    assert consumers.client_ids(G) == ["c-fresh"]
    assert events == [(G, ["c-fresh"])]
    assert consumers.scan_expired(now_ms=clock() + 60_000) == [(G, "c-fresh", fresh)]
    assert consumers.group_info(G) is None and consumers.group_names() == []
    assert events[-1] == (G, [])
    assert len(consumers._channels) == 0  # noqa: SLF001 - bounded memory


def test_channel_closed_removes_all_its_registrations(consumers, events):
    shared, other = Channel("shared"), Channel("other")
    register(consumers, "c1", shared, group="g1")
    register(consumers, "c1", shared, group="g2")
    register(consumers, "c2", other, group="g1")
    events.clear()
    assert consumers.channel_closed(shared) == ["g1", "g2"]
    assert consumers.client_ids("g1") == ["c2"]
    assert consumers.group_info("g2") is None
    assert sorted(events) == [("g1", ["c2"]), ("g2", [])]
    assert consumers.channel_closed(shared) == []
    assert consumers.channels("g1") == [other]


def test_reconnect_moves_client_to_new_channel(consumers, events):
    first, second = Channel("first"), Channel("second")
    register(consumers, "c1", first)
    events.clear()
    assert register(consumers, "c1", second) is False
    assert consumers.channels(G) == [second]
    assert consumers.channel_closed(first) == []  # the stale connection carries nothing
    assert consumers.client_ids(G) == ["c1"]
    assert consumers.channel_closed(second) == [G]
    assert len(consumers._channels) == 0  # noqa: SLF001


def test_unregister(consumers, events):
    register(consumers, "c1", Channel("1"))
    register(consumers, "c2", Channel("2"))
    events.clear()
    assert consumers.unregister(G, "c1") is True
    assert consumers.unregister(G, "c1") is False
    assert consumers.unregister("no-group", "c1") is False
    assert events == [(G, ["c2"])]
    consumers.unregister(G, "c2")
    assert events[-1] == (G, []) and consumers.group_names() == []


def test_broken_listener_does_not_stop_others(clock):
    manager = ConsumerManager(clock=clock)
    seen = []

    def broken(group, ids):
        raise RuntimeError("front-end bug")

    manager.add_listener(broken)
    manager.add_listener(lambda group, ids: seen.append(ids))
    assert register(manager, "c1", Channel("1")) is True
    assert seen == [["c1"]] and manager.client_ids(G) == ["c1"]


def test_unknown_message_model_is_rejected(consumers):
    with pytest.raises(ValueError, match="message model"):
        consumers.register(G, "c1", Channel("1"), PUSH, "CLUSTER", LAST, subs("T"))
    assert consumers.group_names() == []


@pytest.mark.parametrize("expression", [None, "", "*", " * "])
def test_subscribe_all(expression):
    sub = SubscriptionData.from_expression("T", expression)
    assert (sub.sub_string, sub.tags_set, sub.code_set) == ("*", frozenset(), frozenset())


def test_tag_expression_builds_tags_and_java_hash_codes():
    sub = SubscriptionData.from_expression("T", " TagA ||TagB|| ", sub_version=7)
    assert sub.tags_set == {"TagA", "TagB"}
    assert sub.code_set == {tags_code("TagA"), tags_code("TagB")}
    assert tags_code("TagA") == 2_598_919  # Java: "TagA".hashCode()
    assert (sub.expression_type, sub.sub_version) == ("TAG", 7)


def test_sql92_expression_is_kept_whole():
    sub = SubscriptionData.from_expression("T", "a > 5 AND b = 'x'", "SQL92")
    assert sub.sub_string == "a > 5 AND b = 'x'" and sub.tags_set == frozenset()
    with pytest.raises(ValueError, match="empty SQL92"):
        SubscriptionData.from_expression("T", " ", "SQL92")
    with pytest.raises(ValueError, match="expression type"):
        SubscriptionData.from_expression("T", "a", "XPATH")  # type: ignore[arg-type]


# --- producers ------------------------------------------------------------------------


@pytest.fixture
def producers(clock) -> ProducerManager:
    return ProducerManager(channel_expired_timeout_ms=120_000, clock=clock)


def test_pick_channel_rotates_over_live_producers(producers):
    a, b, c = Channel("a"), Channel("b"), Channel("c")
    producers.register("pg", "p-b", b)
    producers.register("pg", "p-a", a)
    producers.register("pg", "p-c", c)
    picks = [producers.pick_channel("pg") for _ in range(6)]
    assert picks == [a, b, c, a, b, c]
    assert producers.pick_channel("other") is None


def test_pick_channel_skips_silent_producers(producers, clock):
    silent, live = Channel("silent"), Channel("live")
    producers.register("pg", "p1", silent)
    clock.advance(100_000)
    producers.register("pg", "p2", live)
    clock.advance(30_000)
    assert {producers.pick_channel("pg") for _ in range(4)} == {live}
    clock.advance(100_000)
    assert producers.pick_channel("pg") is None


def test_producer_expiry_and_closed_channels(producers, clock):
    a, b = Channel("a"), Channel("b")
    producers.register("pg1", "p1", a)
    producers.register("pg2", "p1", a)
    producers.register("pg1", "p2", b)
    clock.advance(100_000)
    producers.register("pg1", "p2", b)  # heartbeat
    clock.advance(30_000)
    assert sorted(producers.scan_expired()) == sorted([("pg1", "p1", a), ("pg2", "p1", a)])
    assert producers.client_ids("pg1") == ["p2"] and producers.client_ids("pg2") == []
    producers.channel_closed(b)
    assert producers.client_ids("pg1") == [] and producers.pick_channel("pg1") is None
    assert len(producers._channels) == 0 and producers._groups == {}  # noqa: SLF001


def test_producer_reconnect_and_unregister(producers):
    first, second = Channel("first"), Channel("second")
    producers.register("pg", "p1", first)
    producers.register("pg", "p1", second)
    producers.channel_closed(first)
    assert producers.pick_channel("pg") is second
    assert producers.unregister("pg", "p1") is True
    assert producers.unregister("pg", "p1") is False
    assert producers.pick_channel("pg") is None
    assert len(producers._channels) == 0  # noqa: SLF001
