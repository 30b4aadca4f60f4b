"""KIP-848's online migration: a running classic group moves to the consumer protocol when a
``group.protocol=consumer`` member joins (the classic member keeps speaking
JoinGroup/SyncGroup/Heartbeat, assigned by the broker), and back to the classic protocol when
the last consumer-protocol member leaves. With confluent-kafka against a live broker, every
record counted: none lost, and a record seen twice only if its commit was refused; the Java
client 3.9 (java/GroupMember.java) on either side of the migration; and the classic member's
steps on a fake clock."""

from __future__ import annotations

import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from confluent_kafka import Consumer, KafkaException, Producer

from rocketport.protocols.kafka.consumer_groups import ConsumerGroupCoordinator, HeartbeatRequest, MemberState
from rocketport.protocols.kafka.consumer_protocol import (
    ConsumerProtocolError,
    encode_assignment,
    parse_assignment,
    parse_subscription,
)
from rocketport.protocols.kafka.coordinator import GroupCoordinator, GroupError, GroupState
from rocketport.protocols.kafka.errors import ErrorCode
from tests.protocols.kafka.java_support import LIB as JAVA_LIB, compile_java
from tests.protocols.kafka.test_confluent_kafka import create_topic
from tests.protocols.kafka.test_kafka_consumer_groups import HEARTBEAT_MS, SESSION_MS, Owners, kip848_consumer, parts
from tests.support.fake_time import FakeTime
from tests.support.kafka import start_broker
from tests.support.live_broker import LiveBroker

TIMEOUT_S = 40


def produce(live: LiveBroker, topic: str, start: int, stop: int) -> None:
    p = Producer({"bootstrap.servers": live.bootstrap, "linger.ms": 5})
    for i in range(start, stop):
        p.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i)
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0


@pytest.fixture
def broker(tmp_path) -> Iterator[LiveBroker]:
    live = start_broker(str(tmp_path / "store"), kafka_group_consumer_session_timeout_ms=SESSION_MS,
                        kafka_group_consumer_heartbeat_interval_ms=HEARTBEAT_MS)
    try:
        yield live
    finally:
        live.stop()


class Ledger:
    """Every record consumed (by value), and those whose commit the broker refused: only
    those may be delivered again."""

    def __init__(self) -> None:
        self.seen: Counter[bytes] = Counter()
        self.uncommitted: set[bytes] = set()
        self.consumers: list[Consumer] = []

    def classic(self, live: LiveBroker, group: str, owners: Owners, name: str, topic: str, **conf) -> Consumer:
        c = Consumer({"bootstrap.servers": live.bootstrap, "group.id": group, "group.protocol": "classic",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300, **conf})
        c.subscribe([topic], **owners.callbacks(name))
        self.consumers.append(c)
        return c

    def consumer(self, live: LiveBroker, group: str, owners: Owners, name: str, topic: str) -> Consumer:
        c = kip848_consumer(live, group, None, **{"enable.auto.commit": False})
        c.subscribe([topic], **owners.callbacks(name))
        self.consumers.append(c)
        return c

    def poll(self, consumers: list[Consumer], done, timeout_s: float = TIMEOUT_S) -> bool:
        """Poll each consumer in turn, committing every record as it comes, until ``done()``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done():
                return True
            for c in consumers:
                msg = c.poll(0.05)
                if msg is None or msg.error():
                    continue
                self.seen[msg.value()] += 1
                try:
                    c.commit(message=msg, asynchronous=False)
                except KafkaException:  # refused mid-rebalance: the next owner reads it again
                    self.uncommitted.add(msg.value())
        return done()

    def close(self) -> None:
        for c in self.consumers:
            try:
                c.close()
            except RuntimeError:
                pass

    def check(self, n: int) -> None:
        assert set(self.seen) == {b"value-%d" % i for i in range(n)}, n - len(self.seen)
        twice = {v for v, k in self.seen.items() if k > 1}
        assert twice <= self.uncommitted, sorted(twice - self.uncommitted)[:10]


@pytest.fixture
def ledger(broker) -> Iterator[Ledger]:
    led = Ledger()
    yield led
    led.close()


def _group(live: LiveBroker, group_id: str):
    handlers = live.server.front_ends["kafka"].handlers
    return (live.run(lambda: handlers.consumer_groups.groups.get(group_id)),
            live.run(lambda: handlers.coordinator.groups.get(group_id)))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_running_classic_group_takes_a_consumer_protocol_member_and_hands_over(broker, ledger, strategy):
    create_topic(broker, "mig1", 4)
    produce(broker, "mig1", 0, 200)
    owners = Owners()
    classic = ledger.classic(broker, "gm1", owners, "classic", "mig1", **{"partition.assignment.strategy": strategy})
    assert ledger.poll([classic], lambda: len(parts(classic)) == 4 and sum(ledger.seen.values()) >= 50)
    assert _group(broker, "gm1")[1] is not None  # a classic group so far

    new = ledger.consumer(broker, "gm1", owners, "new", "mig1")
    both = [classic, new]
    assert ledger.poll(both, lambda: len(parts(classic)) == 2 and len(parts(new)) == 2), (parts(classic), parts(new))
    assert not parts(classic) & parts(new)
    assert not owners.overlaps, owners.overlaps
    consumer_group, classic_group = _group(broker, "gm1")
    assert classic_group is None and consumer_group is not None  # upgraded
    assert sorted(m.classic is not None for m in consumer_group.members.values()) == [False, True]

    produce(broker, "mig1", 200, 400)
    assert ledger.poll(both, lambda: len(ledger.seen) >= 300)  # both consume, the classic one broker-assigned

    classic.close()  # LeaveGroup: the consumer-protocol member takes all four
    ledger.consumers.remove(classic)
    assert ledger.poll([new], lambda: len(parts(new)) == 4)
    assert not owners.overlaps, owners.overlaps
    consumer_group, _ = _group(broker, "gm1")
    assert list(consumer_group.members) == [new.memberid()]
    produce(broker, "mig1", 400, 500)
    assert ledger.poll([new], lambda: len(ledger.seen) >= 500)
    ledger.check(500)


def test_the_last_consumer_protocol_member_leaving_hands_the_group_back_to_the_classic_protocol(broker, ledger):
    create_topic(broker, "mig2", 4)
    produce(broker, "mig2", 0, 100)
    owners = Owners()
    classic = ledger.classic(broker, "gm2", owners, "classic", "mig2")
    assert ledger.poll([classic], lambda: len(parts(classic)) == 4)
    new = ledger.consumer(broker, "gm2", owners, "new", "mig2")
    assert ledger.poll([classic, new], lambda: len(parts(classic)) == 2 and len(parts(new)) == 2)
    assert _group(broker, "gm2")[0] is not None

    new.close()  # the last consumer-protocol member leaves: a classic group again, rebalanced
    ledger.consumers.remove(new)
    assert ledger.poll([classic], lambda: len(parts(classic)) == 4)
    consumer_group, classic_group = _group(broker, "gm2")
    assert consumer_group is None and list(classic_group.members) == [classic.memberid()]

    other = ledger.classic(broker, "gm2", owners, "other", "mig2")  # classic members join as ever
    assert ledger.poll([classic, other], lambda: len(parts(classic)) == 2 and len(parts(other)) == 2)
    assert not owners.overlaps, owners.overlaps
    produce(broker, "mig2", 100, 200)
    assert ledger.poll([classic, other], lambda: len(ledger.seen) >= 200)
    ledger.check(200)


def test_migration_policy_disabled_keeps_the_protocols_apart(tmp_path):
    live = start_broker(str(tmp_path / "store"), kafka_group_consumer_migration_policy="disabled")
    led = Ledger()
    try:
        create_topic(live, "mig3", 2)
        classic = led.classic(live, "gm3", Owners(), "classic", "mig3")
        assert led.poll([classic], lambda: len(parts(classic)) == 2)
        new = led.consumer(live, "gm3", Owners(), "new", "mig3")
        errors: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while not errors and time.monotonic() < deadline:
            classic.poll(0.05)
            msg = new.poll(0.05)
            if msg is not None and msg.error():
                errors.append(msg.error())
        # loud: librdkafka makes GROUP_ID_NOT_FOUND from the heartbeat a fatal error
        assert errors and "group id does not exist" in str(errors[0]), errors
        assert len(parts(classic)) == 2
    finally:
        led.close()
        live.stop()


# ---------------------------------------------------------------------------- with the Java client
@pytest.fixture(scope="module")
def java_classes(tmp_path_factory) -> Path:
    return compile_java(tmp_path_factory.mktemp("java"), "GroupMember")


class JavaMember:
    """java/GroupMember.java in a process of its own; what it printed, read as it comes."""

    def __init__(self, classes: Path, live: LiveBroker, topic: str, group: str, protocol: str, work: Path) -> None:
        self.stop_file = work / f"stop-{protocol}"
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            ["java", "-cp", f"{classes}:{JAVA_LIB}/*", "GroupMember", live.bootstrap, topic, group, protocol,
             str(self.stop_file)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def parts(self) -> set[int]:
        assigned = [line for line in list(self.lines) if line.startswith("ASSIGN ")]
        text = assigned[-1][len("ASSIGN "):].strip("[]") if assigned else ""
        return {int(p) for p in text.split(", ") if p}

    def values(self, kind: str) -> list[bytes]:
        return [line.split(" ", 1)[1].encode() for line in list(self.lines) if line.startswith(kind + " ")]

    def stop(self) -> None:
        self.stop_file.touch()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=5)
        assert self.lines[-1] == "CLOSED", self.lines[-5:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.mark.parametrize("java_protocol", ["classic", "consumer"])
def test_the_java_client_on_either_side_of_a_migration(broker, ledger, java_classes, tmp_path, java_protocol):
    """The classic member starts alone; the consumer-protocol member joins (the upgrade) and
    they share the partitions; the classic member leaves and the other takes all four."""
    create_topic(broker, "jmig", 4)
    produce(broker, "jmig", 0, 200)
    owners = Owners()
    members: list[JavaMember] = []
    python: Consumer | None = None

    def java_parts() -> set[int]:
        return members[0].parts() if members else set()

    def python_parts() -> set[int]:
        return parts(python) if python is not None else set()

    def seen() -> set[bytes]:
        return set(ledger.seen) | {v for j in members for v in j.values("REC") + j.values("UNCOMMITTED")}

    def wait(done) -> bool:
        if python is not None:
            return ledger.poll([python], done)
        deadline = time.monotonic() + TIMEOUT_S
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
        return done()

    try:
        if java_protocol == "classic":
            members.append(JavaMember(java_classes, broker, "jmig", "gjm", "classic", tmp_path))
            assert wait(lambda: java_parts() == {0, 1, 2, 3} and len(seen()) >= 50), members[0].lines[-5:]
            python = ledger.consumer(broker, "gjm", owners, "python", "jmig")
        else:
            python = ledger.classic(broker, "gjm", owners, "python", "jmig",
                                    **{"partition.assignment.strategy": "cooperative-sticky"})
            assert wait(lambda: parts(python) == {0, 1, 2, 3} and len(seen()) >= 50)
            assert _group(broker, "gjm")[1] is not None  # a classic group so far
            members.append(JavaMember(java_classes, broker, "jmig", "gjm", "consumer", tmp_path))
        assert wait(lambda: len(java_parts()) == 2 and len(python_parts()) == 2), (java_parts(), python_parts())
        assert not java_parts() & python_parts()
        consumer_group, _ = _group(broker, "gjm")
        assert sorted(m.classic is not None for m in consumer_group.members.values()) == [False, True]

        produce(broker, "jmig", 200, 400)
        assert wait(lambda: len(seen()) >= 300)
        if java_protocol == "classic":
            members[0].stop()
            assert wait(lambda: python_parts() == {0, 1, 2, 3})
        else:
            python.close()
            ledger.consumers.remove(python)
            python = None
            assert wait(lambda: java_parts() == {0, 1, 2, 3}), members[0].lines[-5:]
        produce(broker, "jmig", 400, 500)
        assert wait(lambda: len(seen()) >= 500)
        if java_protocol == "consumer":
            members[0].stop()
    finally:
        for j in members:
            j.kill()
    for j in members:
        ledger.seen.update(j.values("REC") + j.values("UNCOMMITTED"))
        ledger.uncommitted.update(j.values("UNCOMMITTED"))
    assert not owners.overlaps, owners.overlaps
    ledger.check(500)

# ---------------------------------------------------------------------------- on a fake clock

def subscription(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolSubscription v1 (no user data), as a classic consumer sends it."""
    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()
    out = struct.pack(">hi", 1, len(topics)) + b"".join(map(string, topics)) + struct.pack(">i", -1)
    out += struct.pack(">i", len(owned))
    for t, ps in owned.items():
        out += string(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out


def test_a_classic_member_is_told_to_rejoin_until_it_holds_its_target_and_the_group_goes_back():
    clock = FakeTime()
    classic_coord = GroupCoordinator(clock.call_later)
    coord = ConsumerGroupCoordinator(classic_coord, lambda: ["t"], {"t": 4}.get, call_later=clock.call_later)

    def hb(epoch: int, owned: dict | None) -> dict | None:
        return coord.heartbeat(HeartbeatRequest("g", "a", epoch, None, None, 10_000 if epoch == 0 else -1,
                                                ["t"] if epoch == 0 else None, None, None, owned, "c", "h", 1)).assignment

    def join(owned: dict[str, list[int]]):
        return coord.classic_join("g", "c", None, "client", "host", 3000, 5000, "consumer",
                                  [("range", subscription(["t"], owned))], require_known_member_id=False)

    assert hb(0, {}) == {"t": {0, 1, 2, 3}}
    hb(1, {"t": {0, 1, 2, 3}})
    joined = join({})  # a classic member joins the consumer group: two of a's four are its target
    assert joined.generation_id == 2 and joined.leader == "" and joined.protocol_name == "range"
    member = coord.groups["g"].members["c"]
    assert member.state is MemberState.UNRELEASED_PARTITIONS  # a still holds them
    assert parse_assignment(coord.classic_sync("g", 2, "c", None, "consumer", "range")[2]) == {}
    assert coord.classic_heartbeat("g", 2, "c", None) is ErrorCode.NONE  # nothing to rejoin for yet
    kept = hb(1, {"t": {0, 1, 2, 3}})
    hb(1, kept)  # a released two (and moves to epoch 2)
    assert coord.classic_heartbeat("g", 2, "c", None) is ErrorCode.REBALANCE_IN_PROGRESS
    join({})
    got = parse_assignment(coord.classic_sync("g", 2, "c", None, "consumer", "range")[2])
    assert got == {"t": {0, 1, 2, 3} - kept["t"]}
    assert coord.classic_heartbeat("g", 2, "c", None) is ErrorCode.NONE
    assert coord.classic_heartbeat("g", 1, "c", None) is ErrorCode.ILLEGAL_GENERATION
    with pytest.raises(GroupError) as wrong:
        coord.classic_sync("g", 2, "c", None, "consumer", "roundrobin")
    assert wrong.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert coord.validate_commit("g", "c", 2, 7) is ErrorCode.NONE  # a classic member commits by generation
    assert coord.validate_commit("g", "c", 1, 7) is ErrorCode.ILLEGAL_GENERATION

    hb(-1, None)  # a, the last consumer-protocol member, leaves: the classic coordinator takes c
    assert "g" not in coord.groups
    group = classic_coord.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and list(group.members) == ["c"]
    assert parse_assignment(group.members["c"].assignment) == got
    assert classic_coord.heartbeat("g", group.generation, "c", None) is ErrorCode.REBALANCE_IN_PROGRESS


def test_a_classic_member_that_does_not_rejoin_when_told_is_fenced_after_its_rebalance_timeout():
    clock = FakeTime()
    coord = ConsumerGroupCoordinator(GroupCoordinator(clock.call_later), lambda: ["t"], {"t": 4}.get,
                                     call_later=clock.call_later)
    coord.heartbeat(HeartbeatRequest("g", "a", 0, None, None, 10_000, ["t"], None, None, {}, "c", "h", 1))
    coord.classic_join("g", "c", None, "client", "host", 3000, 5000, "consumer",
                       [("range", subscription(["t"], {}))], require_known_member_id=False)
    coord.classic_sync("g", 2, "c", None, None, None)
    coord.heartbeat(HeartbeatRequest("g", "b", 0, None, None, 10_000, ["t"], None, None, {}, "c", "h", 1))
    assert coord.classic_heartbeat("g", 2, "c", None) is ErrorCode.REBALANCE_IN_PROGRESS  # b joined
    for _ in range(2):  # it heartbeats (within its 3 s session) but never rejoins
        clock.advance(2.4)
        coord.classic_heartbeat("g", 2, "c", None)
        coord.heartbeat(HeartbeatRequest("g", "a", coord.groups["g"].members["a"].epoch, None, None, -1, None,
                                         None, None, None, "c", "h", 1))
    assert "c" in coord.groups["g"].members
    clock.advance(0.2)  # 5 s after it was told
    assert "c" not in coord.groups["g"].members


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 63))
def test_consumer_protocol_bytes_from_a_client_parse_or_fail_cleanly(data, cut):
    """A JoinGroup's metadata is client bytes: garbage and truncations are a ConsumerProtocolError
    (INCONSISTENT_GROUP_PROTOCOL to the client), never another exception."""
    good = subscription(["t", "u"], {"t": [0, 1]})
    for sample in (data, good[:cut], good[:cut] + data):
        try:
            parse_subscription(sample)
        except ConsumerProtocolError:
            pass
        try:
            parse_assignment(sample)
        except ConsumerProtocolError:
            pass
    sub = parse_subscription(good)
    assert (sub.version, sub.topics, sub.owned) == (1, ["t", "u"], {"t": {0, 1}})
    assert parse_assignment(encode_assignment({"t": {3, 1}, "u": set()}, 3)) == {"t": {1, 3}}
