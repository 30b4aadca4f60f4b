"""A KIP-848 group survives a SIGKILL of its broker (consumer_group_log.py): written to the log
within half a second of its last change, it is read back at the restart, so its member
heartbeats on with the epoch and partitions it had, no rejoin. Real broker processes; the
member is a raw client, so that the test says when it heartbeats."""

from __future__ import annotations

import socket
import time

from confluent_kafka.admin import AdminClient, NewTopic

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.protocols.kafka.kafka_raw import RawClient
from tests.support.processes import start_broker, stop, wait_ready

HB = ApiKey.CONSUMER_GROUP_HEARTBEAT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(port: int) -> tuple[str, ...]:
    return ("listenPort=0", "namesrv.port=0", f"kafka.port={port}")


def _partitions(reply: dict) -> set[int]:
    return {p for tp in reply["assignment"]["topic_partitions"] for p in tp["partitions"]}


def test_a_group_and_its_member_epoch_survive_a_sigkill(tmp_path):
    root, port = tmp_path / "store", _free_port()
    proc = start_broker(root, *_settings(port))
    try:
        wait_ready(proc)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        for future in admin.create_topics([NewTopic("kept-group-topic", 3, 1)]).values():
            future.result(20)
        with RawClient(port) as raw:
            joined = raw.request(HB, 1, {"group_id": "kept-group", "member_id": "member-1", "member_epoch": 0,
                                         "rebalance_timeout_ms": 30000,
                                         "subscribed_topic_names": ["kept-group-topic"], "topic_partitions": []})
            assert joined["error_code"] == ErrorCode.NONE
            epoch, owned = joined["member_epoch"], _partitions(joined)
            assert owned == {0, 1, 2}
        time.sleep(1.5)  # past the group log's half-second flush
    finally:
        proc.kill()
        proc.wait()
    proc = start_broker(root, *_settings(port))
    try:
        wait_ready(proc)
        with RawClient(port) as raw:
            topic_id = raw.request(ApiKey.METADATA, 12, {"topics": [{"name": "kept-group-topic", "topic_id": bytes(16)}],
                                                         "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})["topics"][0]["topic_id"]
            again = raw.request(HB, 1, {"group_id": "kept-group", "member_id": "member-1", "member_epoch": epoch,
                                        "topic_partitions": [{"topic_id": topic_id, "partitions": [0, 1, 2]}]})
            assert again["error_code"] == ErrorCode.NONE
            assert again["member_epoch"] == epoch  # the same epoch: no rejoin, no rebalance
    finally:
        stop(proc)
