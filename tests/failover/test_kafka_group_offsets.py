"""A Kafka consumer group's committed offsets through a failover on etcd: a group commits
(OffsetCommit, answered once an in-sync slave has the offsets under SYNC_MASTER), the master
is SIGKILLed at once, and after the election the group's coordinator is the new master
(FindCoordinator), which answers the same committed offsets; a new member of the group
reads exactly the records after them, none of those before."""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.failover.cluster import TTL_S, group_node, join_slaves, leader_id, poll_until, send_many
from tests.ha.cluster import wait_for

TOPIC = "KafkaKeptOffsets"
GROUP = "kept-offsets"


@pytest.mark.slow  # ~15 s at load 2: three brokers, an election and two group joins
def test_a_groups_committed_offsets_survive_a_master_sigkill(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    nodes = [group_node(tmp_path, i, namesrv, endpoints, kafka=True) for i in (1, 2, 3)]
    nodes[0].broker.start()
    try:
        join_slaves(nodes, endpoints)
        records = send_many(namesrv, TOPIC, [b"native"])  # the topic, then on every node
        assert len(records) == 1
        bootstrap = ",".join(f"127.0.0.1:{n.kafka_port}" for n in nodes)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
        for i in range(200):
            producer.produce(TOPIC, b"kafka-%03d" % i)
            records.append(b"kafka-%03d" % i)
        assert producer.flush(30) == 0
        settings = {"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                    "enable.auto.commit": False}
        first = Consumer(settings)
        first.subscribe([TOPIC])
        before: list[bytes] = []
        poll_until(first, before, 120, 30)
        assert len(before) == 120
        first.commit(asynchronous=False)  # the positions after the records read
        count = len(first.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions)
        partitions = [TopicPartition(TOPIC, i) for i in range(count)]
        committed = {p.partition: p.offset for p in first.committed(partitions, timeout=10)}
        assert sum(max(o, 0) for o in committed.values()) == len(before)  # each partition's position
        first.close()
        nodes[0].broker.kill()  # at once: the commit's answer waited for a slave
        wait_for(lambda: leader_id(endpoints) not in (None, 1), timeout=10 * TTL_S, what="a new master")
        second = Consumer(settings)
        # the new coordinator: OffsetFetch retried until the group's coordinator answers
        wait_for(lambda: {p.partition: p.offset for p in second.committed(partitions, timeout=5)} == committed,
                 timeout=10 * TTL_S, what="the committed offsets from the new master")
        second.subscribe([TOPIC])
        after: list[bytes] = []
        rest = Counter(records) - Counter(before)
        poll_until(second, after, sum(rest.values()), 60)
        poll_until(second, after, len(records) + 1, 2)  # anything more shows as a duplicate
        second.close()
        assert Counter(after) == rest
    finally:
        for n in nodes:
            n.broker.stop()
