"""Only the master coordinates Kafka groups and transactional ids; real processes, a master
and a slave. A slave's group and transaction state are its master's copies, so it answers
every coordinator request NOT_COORDINATOR, DescribeGroups and ConsumerGroupDescribe included (the client asks FindCoordinator again and retries
at the master, as with a Kafka broker that is not the coordinator). Its FindCoordinator names
the master once it knows the master's Kafka address, and COORDINATOR_NOT_AVAILABLE while it
knows no master (the window of an election), never itself: a slave used to name itself
then, and answered the group's commits GROUP_ID_NOT_FOUND, which failed them."""

from __future__ import annotations

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.ha.cluster import master_and_slave, wait_for
from tests.protocols.kafka.kafka_raw import RawClient

GROUP, TXN, TOPIC = "coordinated", "coordinated-txn", "Coordinated"


def find_coordinator(port: int, key: str, key_type: int) -> dict:
    with RawClient(port) as client:
        return client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type,
                                                           "coordinator_keys": [key]})["coordinators"][0]


def coordinator_codes(port: int) -> dict[str, int]:
    """The error code each coordinator request gets from the broker at ``port``."""
    with RawClient(port) as client:
        join = client.request(ApiKey.JOIN_GROUP, 5, {
            "group_id": GROUP, "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        beat = client.request(ApiKey.HEARTBEAT, 3, {"group_id": GROUP, "generation_id": 1, "member_id": "m",
                                                    "group_instance_id": None})
        commit = client.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        fetched = client.request(ApiKey.OFFSET_FETCH, 8, {"require_stable": False, "groups": [
            {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
        init = client.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": TXN, "transaction_timeout_ms": 60000})
        described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP],
                                                               "include_authorized_operations": False})
        described_848 = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": [GROUP], "include_authorized_operations": False})
        end = client.request(ApiKey.END_TXN, 1, {"transactional_id": TXN, "producer_id": 1 << 32,
                                                 "producer_epoch": 0, "committed": True})
    return {"join": join["error_code"], "heartbeat": beat["error_code"],
            "commit": commit["topics"][0]["partitions"][0]["error_code"],
            "fetch": fetched["groups"][0]["error_code"], "init_producer_id": init["error_code"],
            "end_txn": end["error_code"], "describe": described["groups"][0]["error_code"],
            "describe_848": described_848["groups"][0]["error_code"]}


def test_a_slave_sends_coordinator_requests_to_its_master(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH", kafka=True)
    slave.broker.start()  # alone first: it knows no master
    try:
        for key, key_type in ((GROUP, 0), (TXN, 1)):
            alone = find_coordinator(slave.kafka_port, key, key_type)
            assert (alone["error_code"], alone["node_id"]) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        assert set(coordinator_codes(slave.kafka_port).values()) == {ErrorCode.NOT_COORDINATOR}
        master.broker.start()
        for key, key_type in ((GROUP, 0), (TXN, 1)):
            wait_for(lambda: find_coordinator(slave.kafka_port, key, key_type)["port"] == master.kafka_port,
                     timeout=60, what="the slave naming the master coordinator")
            named = find_coordinator(slave.kafka_port, key, key_type)
            assert (named["error_code"], named["node_id"]) == (ErrorCode.NONE, 0)
        assert set(coordinator_codes(slave.kafka_port).values()) == {ErrorCode.NOT_COORDINATOR}
        at_master = coordinator_codes(master.kafka_port)
        assert at_master["fetch"] == at_master["init_producer_id"] == at_master["describe"] == ErrorCode.NONE
        assert at_master["describe_848"] == ErrorCode.GROUP_ID_NOT_FOUND  # a classic group there
        assert at_master["join"] != ErrorCode.NOT_COORDINATOR and at_master["heartbeat"] != ErrorCode.NOT_COORDINATOR
    finally:
        master.broker.stop()
        slave.broker.stop()
