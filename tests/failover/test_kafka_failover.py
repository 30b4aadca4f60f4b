"""Kafka clients through a failover on etcd: each node is a Kafka node under its own
brokerId for life, and every node's Metadata names the elected master leader of every
partition, with the election's epoch as leader_epoch; after the master of three is
SIGKILLed, the survivors' Metadata names the new master leader under the id and at the
Kafka port it had as a slave (so clients keep their connection to it). An idempotent
confluent-kafka producer (acks=all) that kept producing through the kill, and one started
after it, have every acknowledged record read back exactly once, by a consumer group after
the failover and by a consumer assigned every partition that read through it. The new
master fences a client naming the old epoch (KIP-320) and answers OffsetForLeaderEpoch
from its epoch history."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.failover.cluster import TTL_S, Deliveries, idempotent_producer, kafka_group, leader_id, poll_until
from tests.ha.cluster import wait_for
from tests.protocols.kafka.kafka_raw import RawClient
from tests.protocols.kafka.test_kafka_leader_epoch import epoch_end, fetch, list_latest

TOPIC = "KafkaView"


def leader_epochs(port: int) -> set[int]:
    """The partitions' leader_epoch in the Metadata (v9) of the node on ``port``."""
    with RawClient(port) as client:
        answer = client.request(ApiKey.METADATA, 9, {
            "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
    return {p["leader_epoch"] for t in answer["topics"] for p in t["partitions"]}


def view(port: int) -> tuple[set[int], dict[int, int]] | None:
    """(the partitions' leaders, each listed node's Kafka port) as the node on ``port``
    answers; None on error."""
    try:
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(TOPIC, timeout=5)
    except KafkaException:
        return None
    topic = md.topics.get(TOPIC)
    if topic is None or topic.error is not None:
        return None
    return {p.leader for p in topic.partitions.values()}, {i: b.port for i, b in md.brokers.items()}


def names_leader(port: int, leader: int, leader_port: int) -> bool:
    """Whether the node on ``port`` names ``leader`` leader of every partition, at ``leader_port``."""
    seen = view(port)
    return seen is not None and seen[0] == {leader} and seen[1].get(leader) == leader_port


@pytest.mark.slow  # ~25 s; the native client's kill test covers the election in the default suite
def test_the_new_master_leads_under_its_own_id_and_an_idempotent_producer_loses_nothing(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    with kafka_group(tmp_path, namesrv, endpoints, TOPIC) as nodes:
        ports = {i: n.kafka_port for i, n in enumerate(nodes, 1)}  # each node under its brokerId
        for n in nodes:
            wait_for(lambda: view(n.kafka_port) == ({1}, ports), timeout=30,
                     what=f"node {n.port}'s Metadata listing the group and naming node 1 leader")
            assert leader_epochs(n.kafka_port) == {1}  # the group's first election
        bootstrap = ",".join(f"127.0.0.1:{n.kafka_port}" for n in nodes)
        producer = idempotent_producer(bootstrap)
        deliveries = Deliveries([b"native"])
        acked, failed, report = deliveries.acked, deliveries.failed, deliveries.report

        def produce(prefix: bytes, n: int) -> None:
            for i in range(n):
                producer.produce(TOPIC, b"%s-%05d" % (prefix, i), on_delivery=report)
                producer.poll(0)

        produce(b"before", 500)
        assert producer.flush(30) == 0 and not failed, failed
        count = len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
                    .topics[TOPIC].partitions)
        # a consumer that reads through the failover: assigned every partition, no group, so
        # its positions stay its own (librdkafka checks them with OffsetForLeaderEpoch)
        follower = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-follower",
                             "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
        follower.assign([TopicPartition(TOPIC, i, OFFSET_BEGINNING) for i in range(count)])
        followed: list[bytes] = []
        poll_until(follower, followed, len(acked), 30)
        assert len(followed) == len(acked)
        nodes[0].broker.kill()
        produce(b"during", 200)  # waits in the producer until the new master takes it
        assert producer.flush(10 * TTL_S + 30) == 0
        new_id = leader_id(endpoints)
        new = nodes[new_id - 1]
        assert new is not nodes[0]
        for n in nodes[1:]:
            wait_for(lambda: names_leader(n.kafka_port, new_id, new.kafka_port), timeout=10 * TTL_S,
                     what=f"node {n.port}'s Metadata naming the new master leader under its own id")
            assert leader_epochs(n.kafka_port) == {2}  # higher: clients drop older metadata
        with RawClient(new.kafka_port) as client:  # KIP-320 on the new master (epoch 2)
            assert fetch(client, TOPIC, 1)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
            assert fetch(client, TOPIC, 3)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
            assert list_latest(client, TOPIC, 2)["leader_epoch"] == 2
            for i in range(count):
                high = list_latest(client, TOPIC, 2, i)["offset"]
                first = epoch_end(client, TOPIC, 1, current=2, partition=i)
                assert first["error_code"] == ErrorCode.NONE and first["leader_epoch"] == 1
                assert 0 <= first["end_offset"] <= high  # where epoch 2's writes began
                assert epoch_end(client, TOPIC, 2, current=2, partition=i)["end_offset"] == high
        produce(b"after", 200)
        assert producer.flush(30) == 0
        # a producer started now takes its id from the new master: never one the old master
        # (or a slave) gave the first producer, whose sequences it would be judged against
        late = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
        for i in range(100):
            late.produce(TOPIC, b"late-%05d" % i, on_delivery=report)
            late.poll(0)
        assert late.flush(30) == 0
        assert not failed, failed
        poll_until(follower, followed, len(acked), 60)
        follower.close()
        missing, extra = Counter(acked) - Counter(followed), Counter(followed) - Counter(acked)
        assert not missing and not extra, (len(missing), sorted(missing)[:5], len(extra), sorted(extra)[:5])
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
        assert len(acked) == 1001
        assert sorted(read) == sorted(acked)  # each acknowledged record once, nothing else
