"""Kafka transactions through a failover on etcd: a transactional confluent-kafka producer
commits transactions, opens one more and writes into it (its records acknowledged, acks=all),
then the master is SIGKILLed with that transaction open. The transaction coordinator's state
travels in the replicated log, so the new master knows the open transaction, its partitions
and the producer's epoch: the producer's commit of it goes on at the new coordinator (or, if
the client gave up on it, an abort or a new producer's InitProducerId ends it). A
read_committed consumer reading from the new master then gets every record of every
committed transaction exactly once, and the transaction open at the kill wholly or not at
all, never in part; a later transaction of the same producer commits as usual. A second
transactional id left open by a client that vanished at the kill (raw requests, a 5 s
transaction timeout) is aborted by the new master's coordinator when its timeout runs out:
none of its records is read, and the partition's last stable offset moves past it (the
records committed after it there are read)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.failover.cluster import TTL_S, kafka_group, leader_id, poll_until
from tests.ha.cluster import wait_for
from tests.protocols.kafka.kafka_raw import RawClient
from tests.protocols.kafka.test_kafka_transactions_v2 import batch as txn_batch
from tests.protocols.kafka.test_kafka_transactions_v2 import produce_v12

TOPIC = "KafkaTxnFailover"
TXN_ID = "failover-txn"


def batch(prefix: str, n: int = 20) -> list[bytes]:
    return [b"%s-%02d" % (prefix.encode(), i) for i in range(n)]


def transactional(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID,
                         "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000, "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def write(producer: Producer, values: list[bytes]) -> None:
    for value in values:
        producer.produce(TOPIC, value)
    assert producer.flush(30) == 0


@pytest.mark.slow  # 14-25 s with set-up at load 6: three brokers, an election, a transaction timeout
def test_transactions_through_a_master_sigkill_are_read_committed_exactly_once(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    with kafka_group(tmp_path, namesrv, endpoints, TOPIC) as nodes:
        committed = [b"native"]  # the native send that made the topic
        bootstrap = ",".join(f"127.0.0.1:{n.kafka_port}" for n in nodes)
        producer = transactional(bootstrap)
        for t in range(5):
            producer.begin_transaction()
            write(producer, batch(f"txn{t}"))
            producer.commit_transaction(30)
            committed += batch(f"txn{t}")
        with RawClient(nodes[0].kafka_port) as raw:  # a transaction whose client vanishes at the kill
            init = raw.request(ApiKey.INIT_PRODUCER_ID, 5, {"transactional_id": "abandoned",
                                                            "transaction_timeout_ms": 5000,
                                                            "producer_id": -1, "producer_epoch": -1})
            assert init["error_code"] == ErrorCode.NONE
            records = txn_batch(init["producer_id"], init["producer_epoch"], 0, *batch("abandoned"))
            assert produce_v12(raw, "abandoned", TOPIC, {0: records}) == [ErrorCode.NONE]
        producer.begin_transaction()
        write(producer, batch("open"))  # stored on the master and an in-sync slave, not committed

        nodes[0].broker.kill()
        wait_for(lambda: leader_id(endpoints) not in (None, 1), timeout=10 * TTL_S, what="a new master")
        outcome = "committed"
        try:
            producer.commit_transaction(10 * TTL_S + 30)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                outcome = "aborted"
                producer.abort_transaction(30)
            else:  # fatal for this producer: a new one under the same id ends the open transaction
                outcome = "fenced"
                producer = transactional(bootstrap)
        if outcome == "committed":
            committed += batch("open")
        producer.begin_transaction()
        producer.produce(TOPIC, b"after-p0", partition=0)  # behind the abandoned transaction
        write(producer, batch("after"))
        producer.commit_transaction(30)
        committed += [b"after-p0", *batch("after")]

        count = len(Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-meta"})
                    .list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-failover-reader",
                           "isolation.level": "read_committed", "enable.auto.commit": False})
        reader.assign([TopicPartition(TOPIC, i, OFFSET_BEGINNING) for i in range(count)])
        read: list[bytes] = []
        poll_until(reader, read, len(committed), 60)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:  # anything more shows as a duplicate or a leak
            poll_until(reader, read, len(read) + 1, 0.5)
        reader.close()
        assert Counter(read) == Counter(committed), (outcome, Counter(read) - Counter(committed),
                                                     Counter(committed) - Counter(read))
        opened = [v for v in read if v.startswith(b"open-")]
        assert len(opened) in (0, 20)  # the open transaction wholly or not at all
