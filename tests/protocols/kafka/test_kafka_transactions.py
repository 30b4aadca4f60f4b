"""Kafka transactions (KIP-98) on the core's coordinator, driven by real clients: confluent-kafka
(init, commit, abort, send_offsets_to_transaction, fencing, timeouts, read_committed) and
kafka-python's transactional producer; the admin APIs and the LSO through raw requests."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from rocketport.common.batch import Record, build_batch
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.support.live_broker import LiveBroker

from .kafka_raw import RawClient

TIMEOUT_S = 20


def create_topic(live: LiveBroker, name: str, partitions: int = 1) -> None:
    live.run(lambda: live.server.broker.create_topic(name, read_queue_nums=partitions,
                                                     write_queue_nums=partitions))


def txn_producer(live: LiveBroker, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": live.bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(live: LiveBroker, topic: str, isolation: str, *, partitions: int = 1, settle_s: float = 1.5) -> list:
    """Every value a consumer with this isolation level reads from the start, by partition order."""
    c = Consumer({"bootstrap.servers": live.bootstrap, "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eof = [], set()
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = None
    while time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is None:
            if len(eof) == partitions:
                quiet_until = quiet_until or time.monotonic() + settle_s
                if time.monotonic() > quiet_until:
                    break
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            eof.add(msg.partition())
            continue
        quiet_until = None
        got.append(msg.value())
    c.close()
    return got


def offset_fetch(live: LiveBroker, group: str, topic: str, *, require_stable: bool) -> dict:
    with RawClient(live.port) as client:
        r = client.request(ApiKey.OFFSET_FETCH, 8, {"require_stable": require_stable, "groups": [
            {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    return r["groups"][0]["topics"][0]["partitions"][0]


def stable_offset(live: LiveBroker, group: str, topic: str) -> int:
    """The committed offset once no transaction's offsets are pending: after EndTxn is
    answered its markers and offsets land in the background, and until then OffsetFetch
    with require_stable answers UNSTABLE_OFFSET_COMMIT, which Kafka clients retry."""
    for _ in range(200):  # bounded: 200 fetches 0.05 s apart
        fetched = offset_fetch(live, group, topic, require_stable=True)
        if fetched["error_code"] != ErrorCode.UNSTABLE_OFFSET_COMMIT:
            return fetched["committed_offset"]
        time.sleep(0.05)
    raise AssertionError(f"the offsets of {group} on {topic} stayed unstable")


def test_commit_abort_and_read_committed(live_broker):
    create_topic(live_broker, "tx")
    p = txn_producer(live_broker, "tx-1")
    p.begin_transaction()
    for i in range(5):
        p.produce("tx", value=b"committed-%d" % i, partition=0)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx", value=b"aborted-%d" % i, partition=0)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(3):
        p.produce("tx", value=b"open-%d" % i, partition=0)
    p.flush(TIMEOUT_S)
    # the open transaction holds the last stable offset: read_committed stops before it
    committed = [b"committed-%d" % i for i in range(5)]
    assert read_all(live_broker, "tx", "read_committed") == committed
    with RawClient(live_broker.port) as client:
        part = client.fetch("tx", 0, 0)  # isolation_level 1
        assert part["last_stable_offset"] == 12  # 5 + marker + 5 + marker
        assert part["high_watermark"] == 15
        assert [(a["producer_id"] >= 1 << 32, a["first_offset"]) for a in part["aborted_transactions"]] == [(True, 6)]
        r = client.request(ApiKey.LIST_OFFSETS, 4, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": "tx", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert r["topics"][0]["partitions"][0]["offset"] == 12
    p.commit_transaction(TIMEOUT_S)
    assert read_all(live_broker, "tx", "read_committed") == committed + [b"open-%d" % i for i in range(3)]
    assert read_all(live_broker, "tx", "read_uncommitted") == (
        committed + [b"aborted-%d" % i for i in range(5)] + [b"open-%d" % i for i in range(3)])


def test_send_offsets_to_transaction_visible_only_at_commit(live_broker):
    create_topic(live_broker, "src")
    create_topic(live_broker, "dst")
    plain = Producer({"bootstrap.servers": live_broker.bootstrap})
    for i in range(10):
        plain.produce("src", value=b"in-%d" % i, partition=0)
    assert plain.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": live_broker.bootstrap, "group.id": "ctp",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe(["src"])
    seen = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(seen) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            seen.append(msg)
    assert len(seen) == 10
    p = txn_producer(live_broker, "ctp-1")
    for commit, upto in ((False, 4), (True, 10)):
        p.begin_transaction()
        for msg in seen[:upto]:
            p.produce("dst", value=msg.value().upper(), partition=0)
        p.send_offsets_to_transaction([TopicPartition("src", 0, upto)], consumer.consumer_group_metadata(),
                                      TIMEOUT_S)
        assert offset_fetch(live_broker, "ctp", "src", require_stable=True)["error_code"] == \
            ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert offset_fetch(live_broker, "ctp", "src", require_stable=False)["committed_offset"] == -1
        if commit:
            p.commit_transaction(TIMEOUT_S)
        else:
            p.abort_transaction(TIMEOUT_S)
            assert offset_fetch(live_broker, "ctp", "src", require_stable=True)["committed_offset"] == -1
    assert stable_offset(live_broker, "ctp", "src") == 10
    (tp,) = consumer.committed([TopicPartition("src", 0)], timeout=TIMEOUT_S)
    assert tp.offset == 10
    consumer.close()
    assert read_all(live_broker, "dst", "read_committed") == [b"IN-%d" % i for i in range(10)]


def test_a_new_incarnation_fences_the_old_and_aborts_its_transaction(live_broker):
    create_topic(live_broker, "fence")
    old = txn_producer(live_broker, "fence-1")
    old.begin_transaction()
    old.produce("fence", value=b"zombie", partition=0)
    old.flush(TIMEOUT_S)
    new = txn_producer(live_broker, "fence-1")  # aborts the open transaction, bumps the epoch
    with pytest.raises(KafkaException) as exc:
        old.commit_transaction(TIMEOUT_S)
    assert exc.value.args[0].fatal() or exc.value.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    new.begin_transaction()
    new.produce("fence", value=b"alive", partition=0)
    new.commit_transaction(TIMEOUT_S)
    assert read_all(live_broker, "fence", "read_committed") == [b"alive"]
    with RawClient(live_broker.port) as client:  # the old epoch's raw EndTxn: PRODUCER_FENCED
        meta = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["fence-1"]})
        state = meta["transaction_states"][0]
        r = client.request(ApiKey.END_TXN, 3, {"transactional_id": "fence-1", "producer_id": state["producer_id"],
                                               "producer_epoch": state["producer_epoch"] - 1, "committed": True})
        assert r["error_code"] == ErrorCode.PRODUCER_FENCED
        r = client.request(ApiKey.END_TXN, 1, {"transactional_id": "fence-1", "producer_id": state["producer_id"],
                                               "producer_epoch": state["producer_epoch"] - 1, "committed": True})
        assert r["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH  # v0-1 clients know only this one


def test_timed_out_transaction_is_aborted_by_the_coordinator(live_broker):
    create_topic(live_broker, "slow")
    p = txn_producer(live_broker, "slow-1", **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce("slow", value=b"too late", partition=0)
    p.flush(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    with RawClient(live_broker.port) as client:
        while time.monotonic() < deadline:
            state = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["slow-1"]})
            if state["transaction_states"][0]["transaction_state"] == "CompleteAbort":
                break
            time.sleep(0.2)
        assert state["transaction_states"][0]["transaction_state"] == "CompleteAbort"
        assert client.fetch("slow", 0, 0)["last_stable_offset"] == 2  # the record and its abort marker
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT_S)
    assert read_all(live_broker, "slow", "read_committed") == []


def test_transaction_timeout_above_the_broker_maximum_is_refused(live_broker):
    p = Producer({"bootstrap.servers": live_broker.bootstrap, "transactional.id": "long-1",
                  "transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as exc:
        p.init_transactions(TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_list_and_describe_transactions(live_broker):
    create_topic(live_broker, "adm", 2)
    p = txn_producer(live_broker, "adm-1")
    p.begin_transaction()
    p.produce("adm", value=b"a", partition=0)
    p.produce("adm", value=b"b", partition=1)
    p.flush(TIMEOUT_S)
    with RawClient(live_broker.port) as client:
        listed = client.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Bogus"],
                                                              "producer_id_filters": [], "duration_filter": -1})
        assert listed["unknown_state_filters"] == ["Bogus"]
        assert [(t["transactional_id"], t["transaction_state"]) for t in listed["transaction_states"]] == [
            ("adm-1", "Ongoing")]
        described = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["adm-1", "nobody"]})
        adm, nobody = described["transaction_states"]
        assert adm["transaction_state"] == "Ongoing" and adm["transaction_timeout_ms"] == 60000
        assert adm["topics"] == [{"topic": "adm", "partitions": [0, 1]}]
        assert adm["transaction_start_time_ms"] > 0
        assert nobody["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        p.commit_transaction(TIMEOUT_S)
        listed = client.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": [],
                                                              "duration_filter": -1})
        assert [t["transaction_state"] for t in listed["transaction_states"]] == ["CompleteCommit"]
        state = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["adm-1"]})
        state = state["transaction_states"][0]
        assert state["topics"] == []
        # a transactional write outside an open transaction, a stale epoch, a forged marker
        pid, epoch = state["producer_id"], state["producer_epoch"]
        for batch_epoch, control, code in ((epoch, False, ErrorCode.INVALID_TXN_STATE),
                                           (epoch - 1, False, ErrorCode.INVALID_PRODUCER_EPOCH),
                                           (epoch, True, ErrorCode.CORRUPT_MESSAGE)):
            batch = build_batch([Record(0, 0, None, b"x")], base_timestamp=0, producer_id=pid,
                                producer_epoch=batch_epoch, base_sequence=100, transactional=True,
                                control=control)
            assert client.produce("adm", 0, batch)[0] == code


def test_kafka_python_transactional_producer(live_broker):
    create_topic(live_broker, "kp")
    p = KafkaProducer(bootstrap_servers=live_broker.bootstrap, transactional_id="kp-1")
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send("kp", value=b"kept-%d" % i, partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.send("kp", value=b"dropped", partition=0)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send("kp", value=b"last", partition=0)
    p.commit_transaction()
    p.close(TIMEOUT_S)
    c = KafkaConsumer(bootstrap_servers=live_broker.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([KpTopicPartition("kp", 0)])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < 4 and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=300).values():
            got.extend(r.value for r in records)
    c.close()
    assert got == [b"kept-0", b"kept-1", b"kept-2", b"last"]
    assert b"dropped" in read_all(live_broker, "kp", "read_uncommitted")
