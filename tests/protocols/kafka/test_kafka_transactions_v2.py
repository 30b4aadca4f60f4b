"""Kafka's transaction protocol v2 (KIP-890 part 2), as a Kafka 4 client drives it once
ApiVersions finalizes transaction.version 2: no AddPartitionsToTxn or AddOffsetsToTxn (Produce
v12 and TxnOffsetCommit v5 add them), and EndTxn v5 answers the next epoch. Raw requests:
no client library here speaks v2; the records are read back by confluent-kafka."""

from __future__ import annotations

import time

from rocketport.common.batch import Record, build_batch
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey

from .kafka_raw import RawClient
from .test_kafka_transactions import create_topic, offset_fetch, read_all, stable_offset


def batch(pid: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    return build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_timestamp=int(time.time() * 1000),
                       producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=True)


def produce_v12(client: RawClient, txn_id: str, topic: str, batches: dict[int, bytes]) -> list[int]:
    r = client.request(ApiKey.PRODUCE, 12, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 10000,
                                            "topic_data": [{"name": topic, "partition_data": [
                                                {"index": p, "records": b} for p, b in batches.items()]}]})
    return [p["error_code"] for p in r["responses"][0]["partition_responses"]]


def end_txn_v5(client: RawClient, txn_id: str, pid: int, epoch: int, commit: bool) -> dict:
    return client.request(ApiKey.END_TXN, 5, {"transactional_id": txn_id, "producer_id": pid,
                                              "producer_epoch": epoch, "committed": commit})


def test_api_versions_finalize_transaction_version_2(live_broker):
    with RawClient(live_broker.port) as client:
        for version in (3, 4):
            r = client.request(ApiKey.API_VERSIONS, version, {"client_software_name": "t",
                                                              "client_software_version": "1"})
            assert r["finalized_features_epoch"] >= 0
            assert [(f["name"], f["min_version_level"], f["max_version_level"]) for f in r["finalized_features"]] == [
                ("transaction.version", 2, 2)]
            # below v4 a supported minimum of 0 is left out, as Kafka does (KAFKA-17492)
            assert [(f["name"], f["min_version"], f["max_version"]) for f in r["supported_features"]] == (
                [("transaction.version", 0, 2)] if version == 4 else [])
            highest = {k["api_key"]: k["max_version"] for k in r["api_keys"]}
            assert (highest[ApiKey.PRODUCE], highest[ApiKey.END_TXN], highest[ApiKey.TXN_OFFSET_COMMIT]) == (13, 5, 5)


def test_v2_transactions_add_partitions_and_groups_implicitly_and_bump_the_epoch(live_broker):
    create_topic(live_broker, "v2", 2)
    with RawClient(live_broker.port) as client:
        init = client.request(ApiKey.INIT_PRODUCER_ID, 5, {"transactional_id": "v2-1", "transaction_timeout_ms": 60000,
                                                           "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init["producer_id"], init["producer_epoch"]
        # v11 still needs AddPartitionsToTxn first
        r = client.request(ApiKey.PRODUCE, 11, {"transactional_id": "v2-1", "acks": -1, "timeout_ms": 10000,
                                                "topic_data": [{"name": "v2", "partition_data": [
                                                    {"index": 0, "records": batch(pid, epoch, 0, b"v11")}]}]})
        assert r["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.INVALID_TXN_STATE

        assert produce_v12(client, "v2-1", "v2", {0: batch(pid, epoch, 0, b"a0", b"a1"),
                                                  1: batch(pid, epoch, 0, b"b0")}) == [0, 0]
        state = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["v2-1"]})["transaction_states"][0]
        assert state["transaction_state"] == "Ongoing" and state["topics"] == [{"topic": "v2", "partitions": [0, 1]}]
        assert produce_v12(client, "v2-1", "v2", {0: batch(pid, epoch, 2, b"a2")}) == [0]  # already added
        commit = client.request(ApiKey.TXN_OFFSET_COMMIT, 5, {
            "transactional_id": "v2-1", "group_id": "v2-group", "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "v2", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                      "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0  # no AddOffsetsToTxn before it
        assert offset_fetch(live_broker, "v2-group", "v2", require_stable=False)["committed_offset"] == -1
        assert read_all(live_broker, "v2", "read_committed", partitions=2, settle_s=0.3) == []

        ended = end_txn_v5(client, "v2-1", pid, epoch, True)
        assert (ended["error_code"], ended["producer_id"], ended["producer_epoch"]) == (0, pid, epoch + 1)
        assert stable_offset(live_broker, "v2-group", "v2") == 7
        # a late write of the ended transaction is fenced; its lost answer's retry is answered again
        assert produce_v12(client, "v2-1", "v2", {0: batch(pid, epoch, 3, b"late")}) == [
            ErrorCode.INVALID_PRODUCER_EPOCH]
        again = end_txn_v5(client, "v2-1", pid, epoch, True)
        assert (again["error_code"], again["producer_epoch"]) == (0, epoch + 1)

        # the next transaction: the new epoch, sequences from 0; then an abort
        epoch += 1
        assert produce_v12(client, "v2-1", "v2", {1: batch(pid, epoch, 0, b"aborted")}) == [0]
        ended = end_txn_v5(client, "v2-1", pid, epoch, False)
        assert (ended["error_code"], ended["producer_epoch"]) == (0, epoch + 1)
        assert end_txn_v5(client, "v2-1", pid, epoch + 1, True)["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert sorted(read_all(live_broker, "v2", "read_committed", partitions=2)) == [b"a0", b"a1", b"a2", b"b0"]
