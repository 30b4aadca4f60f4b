"""The election on a three-node etcd that loses a node: the master keeps its lease through
the loss (no needless failover), and a master SIGKILLed afterwards is still replaced by an
in-sync slave, with every acknowledged send read back once."""

from __future__ import annotations

import pytest

from tests.failover.cluster import TTL_S, group_node, join_slaves, leader_id, read_all, send_many, send_until_acked
from tests.support.etcd import etcd_cluster

TOPIC = "EtcdLossTopic"


@pytest.fixture
def etcd3(tmp_path):
    cluster = etcd_cluster(tmp_path / "etcd3", size=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.slow  # ~20 s: three etcd nodes and three brokers
def test_losing_one_etcd_node_of_three_changes_nothing_and_failover_still_works(tmp_path, etcd3, namesrv):
    endpoints = etcd3.endpoints
    nodes = [group_node(tmp_path, i, namesrv, endpoints) for i in (1, 2, 3)]
    nodes[0].broker.start()
    try:
        join_slaves(nodes, endpoints)
        acked = send_many(namesrv, TOPIC, [b"before-%04d" % i for i in range(100)])
        etcd3.kill(0)  # the first endpoint every broker tries
        survivors = ",".join(n.endpoint for n in etcd3.nodes[1:])
        acked += send_many(namesrv, TOPIC, [b"one-down-%04d" % i for i in range(100)])
        assert len(acked) == 200
        assert leader_id(survivors) == 1  # still node 1's: it renewed through the other nodes
        nodes[0].broker.kill()
        sent = set(acked)
        send_until_acked(namesrv, TOPIC, (b"after-%04d" % i for i in range(10_000)), sent, acked, 10 * TTL_S)
        assert leader_id(survivors) in (2, 3)
        read = read_all(namesrv, TOPIC, "etcd-loss-reader", acked)
        assert set(acked) <= set(read) <= sent and len(read) == len(set(read))
    finally:
        for n in nodes:
            n.broker.stop()
