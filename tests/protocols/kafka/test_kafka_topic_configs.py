"""Topic configs: validated (INVALID_CONFIG), honoured validate_only, altered by both
AlterConfigs and IncrementalAlterConfigs, kept across restart, described with their source
and synonyms; cleanup.policy=compact refuses keyless records (INVALID_RECORD, record_errors)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from rocketport.common.batch import Record, build_batch
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.support.kafka import start_broker

from .kafka_raw import PRODUCE_V, RawClient

TIMEOUT_S = 20


def create(admin: AdminClient, topic: NewTopic, validate_only: bool = False) -> None:
    admin.create_topics([topic], validate_only=validate_only, request_timeout=TIMEOUT_S)[topic.topic].result(TIMEOUT_S)


def describe(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)


def test_configs_validated_altered_described_and_kept(tmp_path):
    store = str(tmp_path / "store")
    live = start_broker(store)
    try:
        admin = AdminClient({"bootstrap.servers": live.bootstrap})
        for bad in ({"no.such.config": "1"}, {"cleanup.policy": "bogus"}, {"retention.ms": "soon"}):
            with pytest.raises(KafkaException) as exc:
                create(admin, NewTopic("bad", 1, 1, config=bad))
            assert exc.value.args[0].code() == ErrorCode.INVALID_CONFIG
        create(admin, NewTopic("checked", 2, 1, config={"retention.ms": "60000"}), validate_only=True)
        assert live.run(live.server.broker.get_topic, "checked") is None  # validate_only stores nothing
        create(admin, NewTopic("cfg", 2, 1, config={"retention.ms": "60000", "cleanup.policy": "delete"}))

        entries = describe(admin, "cfg")
        assert entries["retention.ms"].value == "60000"
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert entries["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        synonyms = entries["retention.ms"].synonyms
        assert [(s.name, s.source) for s in synonyms.values()] == [
            ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
            ("log.retention.ms", ConfigSource.DEFAULT_CONFIG.value)]

        # IncrementalAlterConfigs: set, delete, append to a list config
        resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
            ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        bad = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
            ConfigEntry("max.message.bytes", "big", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as exc:
            admin.incremental_alter_configs([bad])[bad].result(TIMEOUT_S)
        assert exc.value.args[0].code() == ErrorCode.INVALID_CONFIG
        entries = describe(admin, "cfg")
        assert entries["max.message.bytes"].value == "2048"
        assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        assert entries["cleanup.policy"].value == "delete,compact"
    finally:
        live.stop()

    live = start_broker(store)
    try:
        admin = AdminClient({"bootstrap.servers": live.bootstrap})
        entries = describe(admin, "cfg")  # kept across restart
        assert entries["max.message.bytes"].value == "2048"
        assert entries["cleanup.policy"].value == "delete,compact"
        # AlterConfigs (key 33): the given set replaces the topic's dynamic configs
        resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg", set_config={"segment.ms": "3600000"})
        admin.alter_configs([resource])[resource].result(TIMEOUT_S)
        entries = describe(admin, "cfg")
        assert entries["segment.ms"].value == "3600000"
        assert entries["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        assert entries["cleanup.policy"].value == "delete"
        bad = ConfigResource(ConfigResource.Type.TOPIC, "cfg", set_config={"cleanup.policy": "bogus"})
        with pytest.raises(KafkaException) as exc:
            admin.alter_configs([bad])[bad].result(TIMEOUT_S)
        assert exc.value.args[0].code() == ErrorCode.INVALID_CONFIG
        with RawClient(live.port) as client:  # validate_only on AlterConfigs changes nothing
            r = client.request(ApiKey.ALTER_CONFIGS, 1, {"validate_only": True, "resources": [
                {"resource_type": 2, "resource_name": "cfg", "configs": [{"name": "segment.ms", "value": "5"}]}]})
            assert r["responses"][0]["error_code"] == ErrorCode.NONE
        assert describe(admin, "cfg")["segment.ms"].value == "3600000"
    finally:
        live.stop()


def test_max_message_bytes_of_the_topic_is_enforced(live_broker):
    admin = AdminClient({"bootstrap.servers": live_broker.bootstrap})
    create(admin, NewTopic("small", 1, 1, config={"max.message.bytes": "1000"}))
    with RawClient(live_broker.port) as client:
        batch = build_batch([Record(0, 0, b"k", bytes(2000))], base_timestamp=0)
        assert client.produce("small", 0, batch)[0] == ErrorCode.MESSAGE_TOO_LARGE
        assert client.produce("small", 0, build_batch([Record(0, 0, b"k", b"v")], base_timestamp=0))[0] == 0


def test_compacted_topic_refuses_keyless_records(live_broker):
    admin = AdminClient({"bootstrap.servers": live_broker.bootstrap})
    create(admin, NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"}))
    batch = build_batch([Record(0, 0, b"k0", b"a"), Record(1, 0, None, b"b"), Record(2, 0, b"k2", b"c"),
                         Record(3, 0, None, b"d")], base_timestamp=0, compression=1)
    with RawClient(live_broker.port) as client:
        r = client.request(ApiKey.PRODUCE, PRODUCE_V, client.produce_body("compacted", 0, batch))
        p = r["responses"][0]["partition_responses"][0]
        assert p["error_code"] == ErrorCode.INVALID_RECORD
        assert [e["batch_index"] for e in p["record_errors"]] == [1, 3]
        assert "without key" in p["record_errors"][0]["batch_index_error_message"]
        assert "without key" in p["error_message"]
        keyed = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=0)
        assert client.produce("compacted", 0, keyed) == (ErrorCode.NONE, 0)  # nothing of the bad batch stored
    # a real client hears it as a delivery error
    errors = []
    p = Producer({"bootstrap.servers": live_broker.bootstrap, "retries": 0})
    p.produce("compacted", value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(TIMEOUT_S) == 0  # alone: a batch with a keyless record fails whole
    p.produce("compacted", key=b"k", value=b"keyed", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(TIMEOUT_S) == 0
    codes = sorted(-1 if e is None else e.code() for e in errors)
    del p
    assert codes == [-1, ErrorCode.INVALID_RECORD]
