"""KIP-320's leader epochs on a broker without an election (epoch 0): Fetch and ListOffsets
fence a client naming another epoch (UNKNOWN_LEADER_EPOCH for a newer one), ListOffsets
answers the epoch, and OffsetForLeaderEpoch answers epoch 0's end as the log end. The
failover tests (tests/failover/test_kafka_failover.py) check the same after an election."""

from __future__ import annotations

from rocketport.common.batch.record_batch import parse_header, split_batches, verify_crc
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey

from .kafka_raw import FETCH_V, RawClient, encode_batch
from .test_kafka_session import create_topic


def fetch(client: RawClient, topic: str, epoch: int) -> dict:
    body = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                        "current_leader_epoch": epoch,
                                                        "partition_max_bytes": 1 << 20}]}]}
    return client.request(ApiKey.FETCH, FETCH_V, body)["responses"][0]["partitions"][0]


def list_latest(client: RawClient, topic: str, epoch: int, partition: int = 0) -> dict:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": epoch, "timestamp": -1}]}]}
    return client.request(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0]


def epoch_end(client: RawClient, topic: str, epoch: int, current: int = -1, partition: int = 0) -> dict:
    body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
    return client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)["topics"][0]["partitions"][0]


def test_leader_epochs_without_an_election(any_loop_broker):
    create_topic(any_loop_broker, "epochs")
    with RawClient(any_loop_broker.port) as client:
        for i in range(3):
            assert client.produce("epochs", 0, encode_batch([b"r%d" % i]))[0] == ErrorCode.NONE
        assert fetch(client, "epochs", -1)["error_code"] == ErrorCode.NONE
        assert fetch(client, "epochs", 0)["high_watermark"] == 3
        assert fetch(client, "epochs", 1)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        latest = list_latest(client, "epochs", 0)
        assert (latest["error_code"], latest["offset"], latest["leader_epoch"]) == (ErrorCode.NONE, 3, 0)
        assert list_latest(client, "epochs", 2)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        end = epoch_end(client, "epochs", 0)
        assert (end["error_code"], end["leader_epoch"], end["end_offset"]) == (ErrorCode.NONE, 0, 3)
        end = epoch_end(client, "epochs", 5)  # an epoch this node has not seen: undefined
        assert (end["error_code"], end["leader_epoch"], end["end_offset"]) == (ErrorCode.NONE, -1, -1)
        assert epoch_end(client, "epochs", 0, current=1)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert epoch_end(client, "epochs", 0, partition=9)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for version in range(5):  # every version is served
            body = {"replica_id": -1, "topics": [{"topic": "epochs", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
            answer = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
            assert answer["topics"][0]["partitions"][0]["end_offset"] == 3


def test_an_elected_store_stamps_its_epoch_on_stored_batches(any_loop_broker):
    # a Kafka leader writes its epoch into each batch's partitionLeaderEpoch: a consumer
    # asks OffsetForLeaderEpoch about that epoch after a failover (core/ha/election.py sets it)
    create_topic(any_loop_broker, "stamped")
    store = any_loop_broker.server.broker.store
    with RawClient(any_loop_broker.port) as client:
        assert client.produce("stamped", 0, encode_batch([b"as written"]))[0] == ErrorCode.NONE
        any_loop_broker.run(lambda: setattr(store, "leader_epoch", 3))
        assert client.produce("stamped", 0, encode_batch([b"stamped"]))[0] == ErrorCode.NONE
        records = bytes(fetch(client, "stamped", -1)["records"])
    batches = [parse_header(records, at) for at, _ in split_batches(records)]
    as_written = parse_header(encode_batch([b"x"])).partition_leader_epoch
    assert [b.partition_leader_epoch for b in batches] == [as_written, 3]
    assert all(verify_crc(records, at) for at, _ in split_batches(records))  # outside the batch CRC
