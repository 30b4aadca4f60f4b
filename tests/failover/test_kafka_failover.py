"""Kafka's view of a failover on etcd: every node's Metadata names the elected master as
node 0 (the id routes list a master under, wherever it runs now), leader of every
partition and controller; after the master of three is SIGKILLed, the surviving nodes'
Metadata names the new master, at its own Kafka port, as node 0."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.failover.cluster import TTL_S, group_node, in_sync_set, leader_id, send_many
from tests.ha.cluster import wait_for

TOPIC = "KafkaView"


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


def test_metadata_names_the_elected_master_as_node_0_before_and_after_a_kill(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    nodes = [group_node(tmp_path, i, namesrv, endpoints, kafka=True) for i in (1, 2, 3)]
    nodes[0].broker.start()
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected")
        for n in nodes[1:]:
            n.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], what="the slaves in the in-sync set")
        assert len(send_many(namesrv, TOPIC, [b"m"] * 10)) == 10  # the topic, on every node
        master = ("127.0.0.1", nodes[0].kafka_port)
        for n in nodes:
            wait_for(lambda: view(n.kafka_port) == (master, {0}), timeout=30,
                     what=f"node {n.port}'s Metadata naming node 1 as node 0")
        nodes[0].broker.kill()
        wait_for(lambda: leader_id(endpoints) in (2, 3), timeout=10 * TTL_S, what="a new master")
        new = nodes[leader_id(endpoints) - 1]
        for n in nodes[1:]:
            wait_for(lambda: view(n.kafka_port) == (("127.0.0.1", new.kafka_port), {0}), timeout=10 * TTL_S,
                     what=f"node {n.port}'s Metadata naming the new master as node 0")
    finally:
        for n in nodes:
            n.broker.stop()
