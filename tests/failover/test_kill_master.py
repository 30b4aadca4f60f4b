"""Failover on etcd with real processes: etcd, a name server and three brokers of one group
(controllerMode etcd, SYNC_MASTER). The master is SIGKILLed; an in-sync slave is elected,
registers as brokerId 0, and every send the native client saw acknowledged is read back
exactly once through it; the old master comes back as a slave, cutting nothing it shared,
and both logs agree byte for byte."""

from __future__ import annotations

from rocketport.client.message import SendStatus
from tests.failover.cluster import (TTL_S, group_node, in_sync_set, leader_id, read_all, send_many, send_one,
                                    wait_caught_up)
from tests.ha.cluster import log_digest, log_end, wait_for

TOPIC = "FailoverTopic"


def test_a_killed_master_is_replaced_by_its_in_sync_slave_and_no_ack_is_lost(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    one = group_node(tmp_path, 1, namesrv, endpoints)
    two = group_node(tmp_path, 2, namesrv, endpoints)
    three = group_node(tmp_path, 3, namesrv, endpoints)
    one.broker.start()
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected (alone)")
        two.broker.start()
        three.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], what="the slaves in the in-sync set")
        acked = send_many(namesrv, TOPIC, [b"before-%04d" % i for i in range(300)])
        assert len(acked) == 300
        one.broker.kill()
        tries = iter(range(10_000))
        sent = set(acked)  # every body sent: an unacknowledged one may be stored all the same
        after: list[bytes] = []

        def first_send() -> bool:
            body = b"after-%04d" % next(tries)
            sent.add(body)
            if send_one(namesrv, TOPIC, body) is SendStatus.SEND_OK:
                after.append(body)
            return bool(after)
        wait_for(first_send, timeout=10 * TTL_S, what="a send acknowledged by the new master")
        new = leader_id(endpoints)
        assert new in (2, 3)
        more = [b"more-%04d" % i for i in range(50)]
        sent.update(more)
        acked += after + send_many(namesrv, TOPIC, more)
        read = read_all(namesrv, TOPIC, "failover-reader", acked)
        assert set(acked) <= set(read) <= sent  # every acknowledged message, nothing made up
        assert len(read) == len(set(read))  # each once
        one.broker.start()  # comes back as the new master's slave
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=10 * TTL_S,
                 what="the old master back in sync as a slave")
        assert leader_id(endpoints) == new
        held = wait_caught_up([one, two, three], (two, three)[new - 2])
    finally:
        for n in (one, two, three):
            n.broker.stop()
    master = (two, three)[new - 2]
    for n in (one, two, three):  # the same bytes up to what all held before the stop
        assert log_end(n.root) >= held
        assert log_digest(n.root, held) == log_digest(master.root, held)
