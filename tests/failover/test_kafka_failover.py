"""Kafka clients through a failover on etcd: every node's Metadata names the elected master
as node 0 (the id routes list a master under, wherever it runs now) and leader of every
partition, with the election's epoch as leader_epoch; after the master of three is SIGKILLed, the survivors' Metadata names the new
master, at its own Kafka port, and an idempotent confluent-kafka producer (acks=all) that
kept producing through the kill has every acknowledged record read back exactly once."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from rocketport.protocols.kafka.schema import ApiKey
from tests.failover.cluster import TTL_S, group_node, in_sync_set, leader_id, send_many
from tests.ha.cluster import wait_for
from tests.protocols.kafka.kafka_raw import RawClient

TOPIC = "KafkaView"


def leader_epochs(port: int) -> set[int]:
    """The partitions' leader_epoch in the Metadata (v9) of the node on ``port``."""
    with RawClient(port) as client:
        answer = client.request(ApiKey.METADATA, 9, {
            "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
    return {p["leader_epoch"] for t in answer["topics"] for p in t["partitions"]}


def view(port: int) -> tuple[tuple[str, int] | None, set[int]] | None:
    """(node 0's address, the partitions' leaders) as the node on ``port`` answers; None on error."""
    try:
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(TOPIC, timeout=5)
    except KafkaException:
        return None
    topic = md.topics.get(TOPIC)
    if topic is None or topic.error is not None or 0 not in md.brokers:
        return None
    return (md.brokers[0].host, md.brokers[0].port), {p.leader for p in topic.partitions.values()}


@pytest.mark.slow  # ~25 s; the native client's kill test covers the election in the default suite
def test_the_new_master_is_node_0_and_an_idempotent_producer_loses_nothing(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    nodes = [group_node(tmp_path, i, namesrv, endpoints, kafka=True) for i in (1, 2, 3)]
    nodes[0].broker.start()
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected")
        for n in nodes[1:]:
            n.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], what="the slaves in the in-sync set")
        assert len(send_many(namesrv, TOPIC, [b"native"])) == 1  # the topic, then on every node
        master = ("127.0.0.1", nodes[0].kafka_port)
        for n in nodes:
            wait_for(lambda: view(n.kafka_port) == (master, {0}), timeout=30,
                     what=f"node {n.port}'s Metadata naming node 1 as node 0 and leader")
            assert leader_epochs(n.kafka_port) == {1}  # the group's first election
        bootstrap = ",".join(f"127.0.0.1:{n.kafka_port}" for n in nodes)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "message.timeout.ms": 60_000, "linger.ms": 5})
        acked: list[bytes] = [b"native"]
        failed: list[str] = []

        def report(err, msg) -> None:
            if err is None:
                acked.append(msg.value())
            else:
                failed.append(str(err))

        def produce(prefix: bytes, n: int) -> None:
            for i in range(n):
                producer.produce(TOPIC, b"%s-%05d" % (prefix, i), on_delivery=report)
                producer.poll(0)

        produce(b"before", 500)
        assert producer.flush(30) == 0 and not failed, failed
        nodes[0].broker.kill()
        produce(b"during", 200)  # waits in the producer until the new master takes it
        assert producer.flush(10 * TTL_S + 30) == 0
        new = nodes[leader_id(endpoints) - 1]
        assert new is not nodes[0]
        for n in nodes[1:]:
            wait_for(lambda: view(n.kafka_port) == (("127.0.0.1", new.kafka_port), {0}), timeout=10 * TTL_S,
                     what=f"node {n.port}'s Metadata naming the new master as node 0")
            assert leader_epochs(n.kafka_port) == {2}  # higher: clients drop older metadata
        produce(b"after", 200)
        assert producer.flush(30) == 0
        assert not failed, failed
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-readers",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([TOPIC])
        read: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(read) < len(acked) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append(msg.value())
        consumer.close()
        assert len(acked) == 901
        assert sorted(read) == sorted(acked)  # each acknowledged record once, nothing else
    finally:
        for n in nodes:
            n.broker.stop()
