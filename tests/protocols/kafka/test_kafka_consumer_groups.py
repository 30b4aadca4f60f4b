"""KIP-848 consumer groups (``group.protocol=consumer``) with confluent-kafka against a live
broker: the broker assigns, members reconcile (a partition reaches its new owner only after
the old one revoked it), leaving, fencing, static members, describe, and a consumer group
refusing a classic member it cannot read (migration: test_kafka_group_migration.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from rocketport.core.config import ProtocolConfig
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.protocols.kafka.kafka_raw import RawClient
from tests.protocols.kafka.test_confluent_kafka import create_topic, produce
from tests.support.kafka import kafka_config, start_broker
from tests.support.live_broker import LiveBroker, start_live_broker

TIMEOUT_S = 30
SESSION_MS = 6000
HEARTBEAT_MS = 300
HB = ApiKey.CONSUMER_GROUP_HEARTBEAT


@pytest.fixture
def broker(tmp_path) -> Iterator[LiveBroker]:
    live = start_broker(str(tmp_path / "store"), kafka_group_consumer_session_timeout_ms=SESSION_MS,
                        kafka_group_consumer_heartbeat_interval_ms=HEARTBEAT_MS)
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def made(broker) -> Iterator[list[Consumer]]:
    """Consumers a test made: closed before the broker stops, whatever the test's outcome."""
    consumers: list[Consumer] = []
    yield consumers
    for c in consumers:
        try:
            c.close()
        except RuntimeError:  # closed by the test already
            pass


class Owners:
    """Which consumer holds each partition, from the rebalance callbacks; records any partition
    handed to a consumer while another still held it."""

    def __init__(self) -> None:
        self.holder: dict[int, str] = {}
        self.overlaps: list[tuple[int, str, str]] = []

    def callbacks(self, name: str) -> dict:
        def on_assign(consumer, partitions):
            for tp in partitions:
                other = self.holder.get(tp.partition)
                if other is not None and other != name:
                    self.overlaps.append((tp.partition, other, name))
                self.holder[tp.partition] = name

        def on_revoke(consumer, partitions):
            for tp in partitions:
                if self.holder.get(tp.partition) == name:
                    del self.holder[tp.partition]

        return {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_revoke}


def kip848_consumer(live: LiveBroker, group: str, made: list[Consumer] | None = None, **conf) -> Consumer:
    c = Consumer({"bootstrap.servers": live.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", **conf})
    if made is not None:
        made.append(c)
    return c


def poll_until(consumers: list[Consumer], done, timeout_s: float = TIMEOUT_S, sink: list | None = None) -> bool:
    """Poll every consumer in turn until ``done()``; records (consumer index, message) in sink."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return True
        for i, c in enumerate(consumers):
            msg = c.poll(0.05)
            if msg is not None and sink is not None:
                sink.append((i, msg))
    return done()


def parts(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def values(sink: list) -> list[bytes]:
    return [m.value() for _, m in sink if not m.error()]


def test_two_members_share_four_partitions_and_consume_everything(broker, made):
    create_topic(broker, "k1", 4)
    produce(broker, "k1", 100)
    owners = Owners()
    a = kip848_consumer(broker, "g1", made)
    b = kip848_consumer(broker, "g1", made)
    a.subscribe(["k1"], **owners.callbacks("a"))
    b.subscribe(["k1"], **owners.callbacks("b"))
    sink: list = []
    assert poll_until([a, b], lambda: len(values(sink)) >= 100 and len(parts(a)) == 2 and len(parts(b)) == 2,
                      sink=sink), (parts(a), parts(b), len(values(sink)))
    assert sorted(values(sink)) == sorted(b"value-%d" % i for i in range(100))
    assert not parts(a) & parts(b)
    assert not owners.overlaps
    a.close()
    b.close()


def test_third_member_gets_its_share_only_after_the_others_revoke_and_a_leaver_hands_over(broker, made):
    create_topic(broker, "k2", 4)
    owners = Owners()
    members = []
    for name in ("a", "b"):
        c = kip848_consumer(broker, "g2", made)
        c.subscribe(["k2"], **owners.callbacks(name))
        members.append(c)
    assert poll_until(members, lambda: sorted(len(parts(c)) for c in members) == [2, 2])
    c = kip848_consumer(broker, "g2", made)
    c.subscribe(["k2"], **owners.callbacks("c"))
    members.append(c)
    assert poll_until(members, lambda: sorted(len(parts(m)) for m in members) == [1, 1, 2]), \
        [parts(m) for m in members]
    assert not owners.overlaps, owners.overlaps
    assert set().union(*(parts(m) for m in members)) == {0, 1, 2, 3}

    leaver = members.pop(0)
    leaver.close()  # leaves with epoch -1: the others take its partitions at once
    assert poll_until(members, lambda: sorted(len(parts(m)) for m in members) == [2, 2])
    assert not owners.overlaps, owners.overlaps
    produce(broker, "k2", 100)
    sink: list = []
    assert poll_until(members, lambda: len(values(sink)) >= 100, sink=sink)
    assert sorted(values(sink)) == sorted(b"value-%d" % i for i in range(100))
    for m in members:
        m.close()


def _raw_join(raw: RawClient, group: str, member: str, topic: str) -> dict:
    return raw.request(HB, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                               "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                               "topic_partitions": []})


def test_a_member_that_stops_heartbeating_is_fenced_after_its_session_timeout(broker, made):
    create_topic(broker, "k3", 4)
    produce(broker, "k3", 100)
    with RawClient(broker.port) as raw:
        joined = _raw_join(raw, "g3", "silent-member", "k3")
        assert joined["error_code"] == ErrorCode.NONE and joined["member_epoch"] == 1
        assert sum(len(tp["partitions"]) for tp in joined["assignment"]["topic_partitions"]) == 4
        # it never heartbeats again and never revokes: the real consumer waits for the
        # partitions until the session timeout fences the silent member, then gets all four
        c = kip848_consumer(broker, "g3", made)
        c.subscribe(["k3"])
        sink: list = []
        assert poll_until([c], lambda: len(parts(c)) == 4 and len(values(sink)) >= 100,
                          timeout_s=SESSION_MS / 1000 + TIMEOUT_S, sink=sink)
        assert sorted(values(sink)) == sorted(b"value-%d" % i for i in range(100))
        late = raw.request(HB, 1, {"group_id": "g3", "member_id": "silent-member", "member_epoch": 1})
        assert late["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        c.close()


def test_static_member_keeps_its_partitions_across_a_restart_within_the_session_timeout(broker, made):
    create_topic(broker, "k4", 4)
    a = kip848_consumer(broker, "g4", made, **{"group.instance.id": "instance-a"})
    b = kip848_consumer(broker, "g4", made, **{"group.instance.id": "instance-b"})
    a.subscribe(["k4"])
    b.subscribe(["k4"])
    assert poll_until([a, b], lambda: len(parts(a)) == 2 and len(parts(b)) == 2)
    before_a, before_b = parts(a), parts(b)
    a.close()  # a static member leaves with epoch -2: its partitions wait for it
    assert not poll_until([b], lambda: len(parts(b)) != 2, timeout_s=1.0)
    a2 = kip848_consumer(broker, "g4", made, **{"group.instance.id": "instance-a"})
    a2.subscribe(["k4"])
    assert poll_until([a2, b], lambda: len(parts(a2)) == 2)
    assert parts(a2) == before_a and parts(b) == before_b
    group = broker.server.front_ends["kafka"].handlers.consumer_groups.groups["g4"]
    assert group.static_members["instance-a"] == a2.memberid()
    a2.close()
    b.close()


def test_describe_consumer_groups_shows_members_and_assignments(broker, made):
    create_topic(broker, "k5", 4)
    a = kip848_consumer(broker, "g5", made, **{"client.id": "client-a"})
    b = kip848_consumer(broker, "g5", made, **{"client.id": "client-b"})
    a.subscribe(["k5"])
    b.subscribe(["k5"])
    assert poll_until([a, b], lambda: len(parts(a)) == 2 and len(parts(b)) == 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    description = admin.describe_consumer_groups(["g5"])["g5"].result(TIMEOUT_S)
    assert description.group_id == "g5"
    assert str(description.type).endswith("CONSUMER")
    assert description.partition_assignor == "uniform"
    by_client = {m.client_id: m for m in description.members}
    assert set(by_client) == {"client-a", "client-b"}
    assert {tp.partition for tp in by_client["client-a"].assignment.topic_partitions} == parts(a)
    assert {tp.topic for tp in by_client["client-b"].assignment.topic_partitions} == {"k5"}
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(TIMEOUT_S).valid}
    assert str(listed["g5"].type).endswith("CONSUMER") and str(listed["g5"].state).endswith("STABLE")
    a.close()
    b.close()


def test_regex_subscription_is_resolved_by_the_broker(broker, made):
    for name in ("rx-one", "rx-two", "other"):
        create_topic(broker, name, 2)
        produce(broker, name, 10)
    c = kip848_consumer(broker, "g6", made)
    c.subscribe(["^rx-.*"])
    sink: list = []
    assert poll_until([c], lambda: len(values(sink)) >= 20, sink=sink)
    assert {m.topic() for _, m in sink if not m.error()} == {"rx-one", "rx-two"}
    member = broker.server.front_ends["kafka"].handlers.consumer_groups.groups["g6"].members[c.memberid()]
    assert member.subscribed_topic_regex is not None and not member.subscribed_topic_names
    # a topic made later that the regex matches joins the assignment (a new group epoch)
    create_topic(broker, "rx-three", 2)
    produce(broker, "rx-three", 10)
    assert poll_until([c], lambda: any(m.topic() == "rx-three" for _, m in sink if not m.error()), sink=sink)
    assert {tp.topic for tp in c.assignment()} == {"rx-one", "rx-two", "rx-three"}
    c.close()


def test_a_consumer_group_refuses_a_classic_member_whose_protocol_it_cannot_read(broker, made):
    """Classic members of a KIP-848 group are served by it (online migration,
    test_kafka_group_migration.py) only if they speak the embedded consumer protocol."""
    create_topic(broker, "k7", 2)
    with RawClient(broker.port) as raw:
        assert _raw_join(raw, "g8", "kip848-member", "k7")["error_code"] == ErrorCode.NONE
        for ptype, metadata in (("consumer", b""), ("connect", b"\x00\x00")):
            joined = raw.request(ApiKey.JOIN_GROUP, 5, {
                "group_id": "g8", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
                "group_instance_id": "i", "protocol_type": ptype,
                "protocols": [{"name": "range", "metadata": metadata}]})
            assert joined["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_offset_commit_and_fetch_check_the_member_epoch(broker, made):
    create_topic(broker, "k9", 1)
    with RawClient(broker.port) as raw:
        epoch = _raw_join(raw, "g9", "m9", "k9")["member_epoch"]

        def commit(member: str, member_epoch: int, version: int = 9) -> int:
            out = raw.request(ApiKey.OFFSET_COMMIT, version, {
                "group_id": "g9", "generation_id_or_member_epoch": member_epoch, "member_id": member,
                "topics": [{"name": "k9", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                          "committed_metadata": None}]}]})
            return out["topics"][0]["partitions"][0]["error_code"]

        def fetch(member: str | None, member_epoch: int) -> int:
            out = raw.request(ApiKey.OFFSET_FETCH, 9, {"groups": [
                {"group_id": "g9", "member_id": member, "member_epoch": member_epoch, "topics": None}]})
            return out["groups"][0]["error_code"]

        assert commit("m9", epoch) == ErrorCode.NONE
        assert commit("m9", epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
        assert commit("someone-else", epoch) == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit("m9", epoch, version=8) == ErrorCode.UNSUPPORTED_VERSION
        assert commit("", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
        assert fetch("m9", epoch) == ErrorCode.NONE
        assert fetch("m9", epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
        assert fetch(None, -1) == ErrorCode.NONE  # an admin's read
        assert broker.run(lambda: broker.server.broker.query_offset("g9", "k9", 0)) == 5
        # a group the coordinator does not know (its state dropped): the member's commit is
        # answered as Kafka answers from v9
        broker.run(broker.server.front_ends["kafka"].handlers.consumer_groups.close)
        assert commit("m9", epoch) == ErrorCode.GROUP_ID_NOT_FOUND


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_group_survives_a_broker_restart_without_a_rebalance(tmp_path):
    """Groups come back from the log (consumer_group_log.py): after a clean restart the group
    is there before its member heartbeats, with the same group and member epochs, and the
    member goes on from the offsets it committed, nothing read twice."""
    config = replace(kafka_config(str(tmp_path / "store"), kafka_group_consumer_heartbeat_interval_ms=HEARTBEAT_MS),
                     kafka=ProtocolConfig(True, _free_port(), "127.0.0.1"))  # the same port after the restart
    live = start_live_broker(config)
    c = kip848_consumer(live, "g10", **{"enable.auto.commit": False})
    try:
        create_topic(live, "k10", 2)
        produce(live, "k10", 50)
        c.subscribe(["k10"])
        sink: list = []
        assert poll_until([c], lambda: len(values(sink)) >= 50, sink=sink)
        c.commit(asynchronous=False)
        group = live.server.front_ends["kafka"].handlers.consumer_groups.groups["g10"]
        before = (group.epoch, group.members[c.memberid()].epoch)
    finally:
        live.stop()
    live = start_live_broker(config)
    try:
        group = live.server.front_ends["kafka"].handlers.consumer_groups.groups["g10"]  # before any heartbeat
        assert (group.epoch, group.members[c.memberid()].epoch) == before
        p = Producer({"bootstrap.servers": live.bootstrap})
        for i in range(50):
            p.produce("k10", b"after-%d" % i)
        assert p.flush(TIMEOUT_S) == 0
        later: list = []
        assert poll_until([c], lambda: len(values(later)) >= 50, sink=later)
        assert not poll_until([c], lambda: len(values(later)) > 50, timeout_s=1.0, sink=later)
        assert sorted(values(later)) == sorted(b"after-%d" % i for i in range(50))  # nothing read twice
        group = live.server.front_ends["kafka"].handlers.consumer_groups.groups["g10"]
        assert list(group.members) == [c.memberid()]
        assert (group.epoch, group.members[c.memberid()].epoch) == before  # no rebalance
    finally:
        c.close()
        live.stop()
