"""An election before the lease runs out, on proof that the master's process is gone
(etcdElectOnMasterDeath, on by default), with real processes: etcd, a name server and two
brokers of one group under a 60 s lease, far longer than any wait below.

- SIGKILL: the kernel closes the dead master's sockets, the slave's HA link ends, every
  port the master published refuses connects, and the slave revokes that lease: it is
  elected and acknowledges a send long before the lease could have expired. The killed
  node comes back as its slave. Then a clean stop (SIGTERM) of the new master hands the
  group back at once as well (it revokes its own lease).
- SIGSTOP: a frozen master's ports still complete connects (the kernel's accept queue), so
  the slave, whose link ends by silence, finds no proof and waits for the lease; after
  SIGCONT the old master refuses the write waiting in its socket and follows as a slave."""

from __future__ import annotations

import asyncio
import signal
import socket
import time

from rocketport.core.ha.etcd_client import EtcdClient
from rocketport.protocols.remoting.codes import ResponseCode
from tests.failover.cluster import PREFIX, group_node, in_sync_set, leader_id, read_all, send_many, \
    send_until_acked, wait_caught_up
from tests.failover.test_freeze_master import answer, send_frame
from tests.ha.cluster import wait_for

LONG_TTL = ("etcdLeaseTtl=60", "brokerRole=ASYNC_MASTER")  # alone after a failover: no slave to wait for
BOUND_S = 30  # half the lease: without the proof of death the first wait below times out


def leader_lease(endpoints: str) -> tuple[int, int]:
    """The leader key's lease id and the seconds etcd says that lease has left."""
    async def get():
        client = EtcdClient(endpoints.split(","))
        try:
            kv = await client.get((PREFIX + "leader").encode())
            assert kv is not None
            left = await client.call("lease/timetolive", {"ID": str(kv.lease)})
            return kv.lease, int(left.get("TTL", -1))
        finally:
            await client.close()
    return asyncio.run(get())


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


def test_a_frozen_master_is_not_taken_for_dead(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    ttl = ("etcdLeaseTtl=6", "brokerRole=ASYNC_MASTER")
    one = group_node(tmp_path, 1, namesrv, endpoints, *ttl)
    # the slave ends a silent link after 1 s: it probes the frozen master again and again
    two = group_node(tmp_path, 2, namesrv, endpoints, *ttl, "haHousekeepingInterval=1000")
    one.broker.start()
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected (alone)")
        two.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], what="the slave in the in-sync set")
        acked = send_many(namesrv, "FrozenDeathTopic", [b"before-%03d" % i for i in range(50)])
        wait_caught_up([one, two], one)
        one.broker.proc.send_signal(signal.SIGSTOP)
        lease, left = leader_lease(endpoints)  # etcd's own clock: the lease ends no sooner
        asked = time.monotonic()
        stale = socket.create_connection(("127.0.0.1", one.port), timeout=5)
        try:
            stale.sendall(send_frame(b"written-to-the-frozen-master"))  # waits in its socket
            wait_for(lambda: leader_id(endpoints) == 2, timeout=30, what="node 2 elected once the lease expired")
            replaced_after = time.monotonic() - asked
            sent = set(acked)
            send_until_acked(namesrv, "FrozenDeathTopic", (b"after-%04d" % i for i in range(10_000)),
                             sent, acked, 30)
            one.broker.proc.send_signal(signal.SIGCONT)
            code = answer(stale, 10)
        finally:
            one.broker.proc.send_signal(signal.SIGCONT)
            stale.close()
        assert left > 1 and replaced_after >= left - 1  # not before the lease ran out
        assert code == ResponseCode.SERVICE_NOT_AVAILABLE  # the frozen master accepted no write
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], timeout=30, what="the old master back as a slave")
        assert leader_id(endpoints) == 2
        read = read_all(namesrv, "FrozenDeathTopic", "frozen-death-reader", acked)
        assert set(acked) <= set(read) <= sent and len(read) == len(set(read))
    finally:
        for n in (one, two):
            n.broker.stop()
    assert "no proof it died" in two.broker.log.read_text()  # the slave did probe, and found it alive
