"""The Java client (kafka-clients, the one Spark, Flink and Kafka Connect embed) against a live broker.

A small Java program (java/KafkaClientCheck.java) is compiled with the system `javac` in the
test run. The jars (kafka-clients, lz4-java, snappy-java, zstd-jni, slf4j-api) are put in
.cache/kafka-java by scripts/install-test-deps; KAFKA_JAVA_LIB names another directory.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.protocols.kafka.java_support import LIB, compile_java
from tests.support.kafka import start_broker


@pytest.fixture(scope="module")
def classes(tmp_path_factory) -> Path:
    return compile_java(tmp_path_factory.mktemp("java"), "KafkaClientCheck")


@pytest.mark.parametrize("compression", ["none", "snappy", "lz4", "zstd", "gzip"])
def test_java_idempotent_produce_and_group_consume(live_broker, classes, compression):
    topic = f"java-{compression}"
    live_broker.run(lambda: live_broker.server.broker.create_topic(topic, read_queue_nums=2, write_queue_nums=2))
    result = subprocess.run(
        ["java", "-cp", f"{classes}:{LIB}/*", "KafkaClientCheck", live_broker.bootstrap, topic,
         f"java-group-{compression}", "500", compression],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK 500")
    broker = live_broker.server.broker
    assert sum(live_broker.run(broker.max_offset, topic, q) for q in range(2)) == 500
    assert sum(live_broker.run(broker.query_offset, f"java-group-{compression}", topic, q) for q in range(2)) == 500


def test_java_consumer_with_the_kip848_group_protocol(tmp_path, classes):
    """The Java client 3.9 speaks ConsumerGroupHeartbeat v0 (the broker names the member)."""
    live = start_broker(str(tmp_path / "store"), kafka_group_consumer_heartbeat_interval_ms=500)
    try:
        live.run(lambda: live.server.broker.create_topic("java-848", read_queue_nums=2, write_queue_nums=2))
        result = subprocess.run(
            ["java", "-Dgroup.protocol=consumer", "-cp", f"{classes}:{LIB}/*", "KafkaClientCheck", live.bootstrap,
             "java-848", "java-848-group", "300", "lz4"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip().endswith("OK 300")
        broker = live.server.broker
        assert sum(live.run(broker.query_offset, "java-848-group", "java-848", q) for q in range(2)) == 300
        assert "java-848-group" in live.server.front_ends["kafka"].handlers.consumer_groups.groups
    finally:
        live.stop()


def test_java_client_over_sasl_plain(tmp_path, classes):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: jay\n    secretKey: jay-secret\n    defaultTopicPerm: DENY\n"
                   "    defaultGroupPerm: SUB\n    topicPerms: [java-sasl=PUB|SUB]\n")
    live = start_broker(str(tmp_path / "store"), kafka_sasl_mechanisms="PLAIN", plain_acl_file=str(acl))
    try:
        live.run(lambda: live.server.broker.create_topic("java-sasl", read_queue_nums=2, write_queue_nums=2))

        def run(password: str, count: int) -> subprocess.CompletedProcess:
            return subprocess.run(
                ["java", "-cp", f"{classes}:{LIB}/*", "KafkaClientCheck", live.bootstrap, "java-sasl",
                 "java-sasl-group", str(count), "lz4", "jay", password], capture_output=True, text=True, timeout=120)

        result = run("jay-secret", 200)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip().endswith("OK 200")
        # a refused producer fails each send's future and waits out a reconnect per send
        # (the Java client's own pacing): a few records, so the consumer's error ends the run
        refused = run("not-jays", 3)
        assert refused.returncode != 0 and "SaslAuthenticationException" in refused.stderr, refused.stderr[-3000:]
        assert sum(live.run(live.server.broker.max_offset, "java-sasl", q) for q in range(2)) == 200
    finally:
        live.stop()
