"""enableElectUncleanMaster with real processes: etcd, a name server and a group of two
(ASYNC_MASTER, so the master acknowledges sends while alone). The slave is killed, the master
acknowledges more sends and drops the slave from the in-sync set, then the master is killed
and only the slave comes back: the one survivor is not in the in-sync set.

- false (the default): nobody is elected. The survivor says why in its log and stays a
  slave; a native send fails and a Kafka Produce to it is answered NOT_LEADER_OR_FOLLOWER.
- true (the survivor restarted with it): it is elected, and what the old master
  acknowledged after the survivor fell out of the set is gone. When the old master comes
  back it cuts those records from its own log and follows: they are lost, never merged."""

from __future__ import annotations

from rocketport.protocols.kafka.errors import ErrorCode
from tests.failover.cluster import group_node, in_sync_set, leader_id, read_all, send_many, send_one, \
    wait_caught_up
from tests.ha.cluster import wait_for
from tests.protocols.kafka.kafka_raw import RawClient, encode_batch

TOPIC = "UncleanTopic"
ASYNC = ("brokerRole=ASYNC_MASTER",)
REFUSED = "is not in the in-sync set [1]: waiting for a member (enableElectUncleanMaster=false)"


def test_a_survivor_outside_the_in_sync_set_is_elected_only_when_unclean_election_is_enabled(
        tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    one, two = (group_node(tmp_path, i, namesrv, endpoints, *ASYNC, kafka=True) for i in (1, 2))
    one.broker.start()
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected (alone)")
        two.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], what="node 2 in the in-sync set")
        both = send_many(namesrv, TOPIC, [b"both-%02d" % i for i in range(20)])
        assert len(both) == 20
        wait_caught_up([one, two], one)
        two.broker.kill()
        alone = send_many(namesrv, TOPIC, [b"alone-%02d" % i for i in range(20)])
        assert len(alone) == 20  # acknowledged by node 1 alone (ASYNC_MASTER)
        wait_for(lambda: in_sync_set(endpoints) == [1], what="node 2 out of the in-sync set")
        one.broker.kill()

        two.broker.start()  # the only survivor, behind and outside the set
        wait_for(lambda: REFUSED in two.broker.log.read_text(), what="node 2 refusing to be elected")
        assert leader_id(endpoints) is None and in_sync_set(endpoints) == [1]
        assert send_one(namesrv, TOPIC, b"refused") is None  # no master to send to
        with RawClient(two.kafka_port) as client:
            code, _ = client.produce(TOPIC, 0, encode_batch([b"refused"]))
        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert leader_id(endpoints) is None

        two.broker.stop()
        two.broker.settings = (*two.broker.settings, "enableElectUncleanMaster=true")
        two.broker.start()
        wait_for(lambda: leader_id(endpoints) == 2, what="node 2 elected uncleanly")
        acked = both + send_many(namesrv, TOPIC, [b"after-%02d" % i for i in range(20)])
        assert len(acked) == 40
        read = read_all(namesrv, TOPIC, "unclean-reader", acked)
        assert sorted(read) == sorted(acked)  # what node 1 acknowledged alone is lost
        one.broker.start()  # cuts its own "alone" records and follows node 2
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], what="node 1 back in sync as a slave")
        wait_caught_up([one, two], two)
        assert "cutting" in one.broker.log.read_text()
        assert sorted(read_all(namesrv, TOPIC, "unclean-reader-2", acked)) == sorted(acked)
    finally:
        for n in (one, two):
            n.broker.stop()
