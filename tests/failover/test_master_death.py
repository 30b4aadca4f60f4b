"""An election before the lease runs out, on proof that the master's process is gone
(etcdElectOnMasterDeath, on by default), with real processes: etcd, a name server and two
brokers of one group under a 60 s lease, far longer than any wait below.

- SIGKILL: the kernel closes the dead master's sockets, the slave's HA link ends, every
  port the master published refuses connects, and the slave revokes that lease: it is
  elected and acknowledges a send long before the lease could have expired. The killed
  node comes back as its slave. Then a clean stop (SIGTERM) of the new master hands the
  group back at once as well (it revokes its own lease).
A frozen master (SIGSTOP), whose ports still take connects, is probed and not taken for dead:
test_freeze_master.py."""

from __future__ import annotations

from tests.failover.cluster import group_node, in_sync_set, leader_id, read_all, send_many, send_until_acked, \
    wait_caught_up
from tests.ha.cluster import wait_for

LONG_TTL = ("etcdLeaseTtl=60", "brokerRole=ASYNC_MASTER")  # alone after a failover: no slave to wait for
BOUND_S = 30  # half the lease: without the proof of death the first wait below times out


def test_a_killed_master_is_replaced_at_once_and_a_stopped_one_hands_over(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    one, two = (group_node(tmp_path, i, namesrv, endpoints, *LONG_TTL) for i in (1, 2))
    one.broker.start()
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected (alone)")
        two.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], what="the slave in the in-sync set")
        acked = send_many(namesrv, "DeathTopic", [b"before-%03d" % i for i in range(100)])
        assert len(acked) == 100
        wait_caught_up([one, two], one)  # ASYNC_MASTER: the slave holds every ack before the kill
        one.broker.kill()
        wait_for(lambda: leader_id(endpoints) == 2, timeout=BOUND_S, what="node 2 elected before the lease ran out")
        sent = set(acked)
        send_until_acked(namesrv, "DeathTopic", (b"after-%04d" % i for i in range(10_000)), sent, acked, BOUND_S)
        read = read_all(namesrv, "DeathTopic", "death-reader", acked)
        assert set(acked) <= set(read) <= sent and len(read) == len(set(read))
        one.broker.start()  # back as node 2's slave
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], timeout=BOUND_S, what="node 1 back in sync")
        assert leader_id(endpoints) == 2
        two.broker.stop()  # SIGTERM: a clean stop revokes its own lease
        wait_for(lambda: leader_id(endpoints) == 1, timeout=BOUND_S, what="node 1 elected after the clean stop")
        send_until_acked(namesrv, "DeathTopic", (b"last-%04d" % i for i in range(10_000)), sent, acked, BOUND_S)
    finally:
        for n in (one, two):
            n.broker.stop()
    assert "is gone: every connect to" in two.broker.log.read_text()  # the proof, not the lease, ended it

