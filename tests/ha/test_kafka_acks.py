"""Kafka with a master and a slave, real processes: under SYNC_MASTER acks=all is answered
once the slave holds the batch, and with the slave gone it fails with
NOT_ENOUGH_REPLICAS_AFTER_APPEND (the batch stays stored on the master) while acks=1 is
answered without the slave, as a Kafka leader answers them; both brokers' Metadata list the
group as the replicas of every partition (brokerIds as node ids), the master as leader and
the members in sync as the ISR, so a producer bootstrapped at the slave writes to the master.
Each member hands out idempotent producer ids of its own (a client may ask any broker), so a
slave's never names a producer the master knows."""

from __future__ import annotations

import socket
import struct

from confluent_kafka import KafkaError, Producer

from rocketport.common.batch import Record, build_batch
from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey

from tests.ha.cluster import master_and_slave, wait_for
from tests.ha.test_sync_master import in_sync, runtime

TOPIC = "HaKafka"


def metadata(port: int) -> dict:
    """Metadata v9 for TOPIC asked of the broker at ``port`` (not of any broker it names)."""
    return ask(port, ApiKey.METADATA, {
        "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})


def raw_produce(port: int) -> int:
    """One record to TOPIC partition 0 with Produce v9 sent to the broker at ``port``: its error code."""
    batch = build_batch([Record(0, 0, None, b"to whoever answers")], base_timestamp=1)
    answer = ask(port, ApiKey.PRODUCE, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def ask(port: int, api_key: int, body: dict, version: int = 9) -> dict:
    payload = codec.encode_request_header(api_key, version, 1, "ha-test") + b"".join(
        bytes(part) for part in codec.encode_request(api_key, version, body))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            assert chunk, "closed"
            data += chunk
    _, pos = codec.decode_response_header(api_key, version, data[4:])
    return codec.decode_response(api_key, version, memoryview(data)[4 + pos:])


def produce(port: int, acks: str, values: list[bytes]) -> list[KafkaError | None]:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": acks, "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 20000, "linger.ms": 0})
    errors: list[KafkaError | None] = []
    for value in values:
        producer.produce(TOPIC, value, partition=0, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)
    assert producer.flush(30) == 0
    return errors


def test_acks_all_waits_for_the_slave_and_acks_1_does_not(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv, flush="ASYNC_FLUSH", kafka=True)
    master.broker.start()
    slave.broker.start()
    try:
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")
        assert produce(master.kafka_port, "all", [b"a-%d" % i for i in range(20)]) == [None] * 20
        # answered: the slave had it then (nothing else writes to this master)
        end = int(runtime(master.addr)["commitLogMaxOffset"])
        assert int(runtime(slave.addr)["haSlaveOffset"]) == end
        slave.broker.kill()
        wait_for(lambda: not in_sync(master.addr), what="the master to see the slave gone")
        errors = produce(master.kafka_port, "all", [b"alone"])
        assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND], errors
        assert int(runtime(master.addr)["commitLogMaxOffset"]) > end  # stored all the same
        assert produce(master.kafka_port, "1", [b"leader only"]) == [None]
    finally:
        slave.broker.stop()
        master.broker.stop()


def test_metadata_lists_the_group_as_replicas_and_the_slave_refuses_produce(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH", kafka=True)
    master.broker.start()
    started = False
    try:
        assert produce(master.kafka_port, "1", [b"create the topic"]) == [None]
        slave.broker.start()  # its first copy of the master's topics has it
        started = True
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")

        def partition_of(port: int) -> dict | None:
            """Partition 0 of TOPIC in the Metadata of the broker at ``port`` itself."""
            topics = metadata(port)["topics"]
            return topics[0]["partitions"][0] if topics and topics[0]["partitions"] else None

        def listed_by_both() -> bool:
            found = [partition_of(p) for p in (master.kafka_port, slave.kafka_port)]
            return all(p is not None and p["replica_nodes"] == [0, 1] and p["isr_nodes"] == [0, 1] for p in found)
        wait_for(listed_by_both, timeout=60, what="both brokers' Metadata listing the group in sync")
        assert partition_of(slave.kafka_port)["leader_id"] == 0
        assert raw_produce(slave.kafka_port) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # a producer bootstrapped at the slave finds the leader through Metadata and writes there
        assert produce(slave.kafka_port, "all", [b"through the slave's metadata"]) == [None]
        slave.broker.kill()
        wait_for(lambda: partition_of(master.kafka_port)["isr_nodes"] == [0], what="the ISR without the slave")
    finally:
        if started:
            slave.broker.stop()
        master.broker.stop()


def init_producer_id(port: int) -> int:
    answer = ask(port, ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000}, 1)
    assert answer["error_code"] == ErrorCode.NONE
    return answer["producer_id"]


def test_master_and_slave_hand_out_producer_ids_apart(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH", kafka=True)
    master.broker.start()
    slave.broker.start()
    try:
        # an idempotent producer asks any broker it knows; both used to start at the same id
        from_master = {init_producer_id(master.kafka_port) for _ in range(3)}
        from_slave = {init_producer_id(slave.kafka_port) for _ in range(3)}
        assert len(from_master) == len(from_slave) == 3
        assert not from_master & from_slave
    finally:
        slave.broker.stop()
        master.broker.stop()
