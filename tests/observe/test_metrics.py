"""GET /metrics against a live broker driven by real clients of every protocol: the counts
each protocol stored and handed out, the lag a group is left with (also when one group
consumes over two protocols), connections, the store, and bad HTTP answered with a 400."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

from tests.observe.metrics_support import (
    TIMEOUT,
    all_protocols_config,
    amqp_channel,
    amqp_consume,
    amqp_produce,
    kafka_consume,
    kafka_produce,
    metrics_url,
    remoting_consume,
    remoting_produce,
    scrape,
    stomp_consume,
    stomp_produce,
    value,
    wait_for,
)
from tests.protocols.stomp.stomp_support import connect as stomp_connect
from tests.support.live_broker import LiveBroker, start_live_broker

N, M = 10, 4  # produced and consumed per protocol


@pytest.fixture
def live(tmp_path) -> Iterator[LiveBroker]:
    broker = start_live_broker(all_protocols_config(str(tmp_path / "store")))
    try:
        yield broker
    finally:
        broker.stop()


def _produce_consume(live: LiveBroker) -> dict[str, tuple[str, str]]:
    """Per protocol: M messages produced and consumed, then N - M more produced; the
    (topic, group) whose lag is N - M."""
    kafka_produce(live, "KafkaT", M)
    kafka_consume(live, "KafkaT", "KafkaG", M)
    kafka_produce(live, "KafkaT", N - M, start=M)

    remoting_produce(live, "NativeT", M)
    remoting_consume(live, "NativeT", "NativeG", M)
    remoting_produce(live, "NativeT", N - M)

    amqp_produce(live, "AmqpQ", M)
    amqp_consume(live, "AmqpQ", M)
    amqp_produce(live, "AmqpQ", N - M)

    stomp_produce(live, "/queue/StompQ", M)
    stomp_consume(live, "/queue/StompQ", M, **{"x-group": "StompG"})
    stomp_produce(live, "/queue/StompQ", N - M)
    return {"kafka": ("KafkaT", "KafkaG"), "remoting": ("NativeT", "NativeG"),
            "amqp": ("AmqpQ", "AmqpQ"), "stomp": ("StompQ", "StompG")}


def test_each_protocol_reads_its_counts_and_lag(live):
    groups = _produce_consume(live)

    def settled(samples) -> bool:
        return all(value(samples, "rocketmq_consumer_lag_messages", topic=t, consumer_group=g) == N - M
                   for t, g in groups.values())
    samples = wait_for(live, settled)
    for protocol, (topic, group) in groups.items():
        assert value(samples, "rocketmq_messages_in_total", protocol=protocol) == N, protocol
        assert value(samples, "rocketmq_messages_out_total", protocol=protocol) == M, protocol
        assert value(samples, "rocketmq_throughput_in_total", protocol=protocol) > 0, protocol
        assert value(samples, "rocketmq_throughput_out_total", protocol=protocol) > 0, protocol
        assert value(samples, "rocketmq_consumer_lag_messages", topic=topic, consumer_group=group) == N - M
        assert value(samples, "rocketport_topic_messages_total", topic=topic) == N, topic
        # the oldest unconsumed message waits: its age is known, and not from another day
        latency = value(samples, "rocketmq_consumer_lag_latency", topic=topic, consumer_group=group)
        assert latency is not None and 0 <= latency < 600_000, (topic, latency)
    for protocol in groups:  # every client closed: no connection is left open
        assert value(samples, "rocketport_connections", protocol=protocol) == 0, protocol
    # STOMP and AMQP groups are the broker's: nothing waits unacknowledged, N - M are ready
    assert value(samples, "rocketmq_consumer_inflight_messages", consumer_group="AmqpQ") == 0
    assert value(samples, "rocketmq_consumer_ready_messages", consumer_group="AmqpQ") == N - M
    assert value(samples, "rocketmq_storage_dispatch_behind_bytes") == 0
    assert value(samples, "rocketport_topics") >= 4
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "rocketport_event_loop_lag_seconds") is not None


def test_one_group_consumed_over_two_protocols(live):
    """Group "Shared" reads topic Mixed over Kafka, then over STOMP from where Kafka
    committed: its lag and each protocol's deliveries add up."""
    live.call(lambda: live.server.broker.create_topic("Mixed", read_queue_nums=1, write_queue_nums=1))
    kafka_produce(live, "Mixed", 5)
    kafka_consume(live, "Mixed", "Shared", 5)
    kafka_produce(live, "Mixed", 3, start=5)
    stomp_consume(live, "/queue/Mixed", 3, **{"x-group": "Shared"})
    kafka_produce(live, "Mixed", 4, start=8)

    samples = wait_for(live, lambda s: value(s, "rocketmq_consumer_lag_messages", topic="Mixed",
                                                 consumer_group="Shared") == 4)
    assert value(samples, "rocketmq_consumer_lag_messages", topic="Mixed", consumer_group="Shared") == 4
    assert value(samples, "rocketmq_messages_in_total", protocol="kafka") == 12
    assert value(samples, "rocketmq_messages_out_total", protocol="kafka") == 5
    assert value(samples, "rocketmq_messages_out_total", protocol="stomp") == 3
    assert value(samples, "rocketport_topic_messages_total", topic="Mixed") == 12
    # the commits' forward moves after the group's first one: STOMP's 3
    assert value(samples, "rocketport_group_messages_consumed_total", topic="Mixed", consumer_group="Shared") == 3


def test_lag_follows_every_scrape(live):
    """The collector reuses a group's lag while its queues and commits stay as they were:
    new messages, then a commit, each show on the next scrapes."""
    live.call(lambda: live.server.broker.create_topic("Moving", read_queue_nums=2, write_queue_nums=2))

    def lag_is(expected: int) -> None:
        samples = wait_for(live, lambda s: value(s, "rocketmq_consumer_lag_messages", topic="Moving",
                                                     consumer_group="Mover") == expected)
        assert value(samples, "rocketmq_consumer_lag_messages", topic="Moving", consumer_group="Mover") == expected
        again = scrape(live)  # nothing moved: the same figures
        assert value(again, "rocketmq_consumer_lag_messages", topic="Moving", consumer_group="Mover") == expected
        assert value(again, "rocketport_topic_messages_total", topic="Moving") == produced

    produced = 5
    kafka_produce(live, "Moving", 5)
    kafka_consume(live, "Moving", "Mover", 5)
    lag_is(0)
    produced += 3
    kafka_produce(live, "Moving", 3, start=5)  # the queues moved, the commits did not
    lag_is(3)
    kafka_consume(live, "Moving", "Mover", 3)  # the commits moved
    lag_is(0)
    produced += 2
    kafka_produce(live, "Moving", 2, start=8)
    lag_is(2)
    # OpenMetrics (prometheus-client's writer) reads the same per-object series
    request = urllib.request.Request(metrics_url(live), headers={"Accept": "application/openmetrics-text"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
        families = {f.name: f for f in openmetrics_families(answer.read().decode())}
    lags = {(s.labels["topic"], s.labels["consumer_group"]): s.value
            for s in families["rocketmq_consumer_lag_messages"].samples}
    assert lags[("Moving", "Mover")] == 2
    assert any(s.labels["topic"] == "Moving" and s.value == produced
               for s in families["rocketport_topic_messages"].samples)


def test_connections_by_what_they_do(live):
    kafka_produce(live, "ConnT", 1)
    connection, channel = __import__("tests.observe.metrics_support", fromlist=["amqp_channel"]).amqp_channel(live)
    try:
        channel.queue_declare("ConnQ")
        channel.basic_consume("ConnQ", lambda *args: None)
        samples = wait_for(live, lambda s: value(s, "rocketmq_consumer_connections", protocol="amqp",
                                                 consumer_group="ConnQ") == 1)
        assert value(samples, "rocketport_connections", protocol="amqp") == 1
        assert value(samples, "rocketmq_consumer_connections", protocol="amqp", consumer_group="ConnQ") == 1
        assert value(samples, "rocketmq_consumer_connections", protocol="amqp", consumer_group="") == 0
        assert value(samples, "rocketmq_consumer_connections", protocol="kafka", consumer_group="") == 0
        assert value(samples, "rocketmq_producer_connections", protocol="amqp") == 0
    finally:
        connection.close()


def test_message_size_and_rpc_latency_histograms(live):
    """rocketmq_message_size in RocketMQ 5's byte buckets (STOMP: one observation a message;
    Kafka: a batch at its average, its bytes as carried) and rocketmq_rpc_latency per
    request code: every answered request counted once."""
    conn, _ = stomp_connect(live)
    for size in (100, 100, 100, 5000, 5000):
        conn.send("/queue/SizeQ", b"x" * size)
    conn.disconnect(receipt="bye")
    kafka_produce(live, "SizeT", 4)
    remoting_produce(live, "SizeN", 3)
    samples = wait_for(live, lambda s: value(s, "rocketmq_message_size_count", protocol="stomp") == 5)

    def size(suffix: str, **labels: str) -> float | None:
        return value(samples, "rocketmq_message_size" + suffix, **labels)
    assert [size("_bucket", protocol="stomp", le=le) for le in ("1024.0", "4096.0", "524288.0", "+Inf")] == [3, 3, 5, 5]
    assert size("_count", protocol="stomp") == 5 and size("_sum", protocol="stomp") == 10_300
    assert size("_count", protocol="kafka") == 4
    assert size("_sum", protocol="kafka") == value(samples, "rocketmq_throughput_in_total", protocol="kafka")
    assert size("_count", protocol="remoting") == 3

    def latency(suffix: str, protocol: str, code: int, **labels: str) -> float | None:
        return value(samples, "rocketmq_rpc_latency" + suffix, protocol=protocol, request_code=str(code), **labels)
    produces = latency("_count", "kafka", 0)  # Produce: the client decides how many requests
    assert produces and produces >= 1 and latency("_bucket", "kafka", 0, le="+Inf") == produces
    assert latency("_count", "kafka", 18) and latency("_count", "kafka", 3)  # ApiVersions, Metadata
    assert latency("_count", "remoting", 310) == 3  # SEND_MESSAGE_V2, one a message
    assert latency("_sum", "remoting", 310) >= 0


def test_rpc_latency_of_amqp_methods_and_stomp_frames(live):
    """AMQP methods by name (publishes are not requests) and STOMP frames by command, each
    handled one counted once."""
    connection, channel = amqp_channel(live)
    try:
        channel.queue_declare("LatencyQ")
        channel.queue_declare("LatencyQ")
        channel.basic_publish("", "LatencyQ", b"not a request")
        assert channel.basic_get("LatencyQ", auto_ack=True)[2] == b"not a request"
    finally:
        connection.close()
    conn, listener = stomp_connect(live)
    conn.subscribe("/queue/LatencyS", id="1", headers={"receipt": "subscribed"})
    conn.send("/queue/LatencyS", b"with a receipt", headers={"receipt": "sent"})
    conn.send("/queue/LatencyS", b"without")
    assert len(listener.wait_messages(2)) == 2
    conn.disconnect(receipt="bye")
    samples = wait_for(live, lambda s: value(s, "rocketmq_rpc_latency_count", protocol="stomp",
                                             request_code="DISCONNECT") == 1)

    def count(protocol: str, code: str) -> float | None:
        return value(samples, "rocketmq_rpc_latency_count", protocol=protocol, request_code=code)
    assert count("amqp", "queue.declare") == 2 and count("amqp", "basic.get") == 1
    assert count("amqp", "basic.publish") is None
    assert value(samples, "rocketmq_rpc_latency_bucket", protocol="amqp", request_code="queue.declare",
                 le="+Inf") == 2
    # the SEND without a receipt goes through the plain-send lane and is answered by nothing
    assert count("stomp", "SUBSCRIBE") == 1 and count("stomp", "SEND") == 1
    assert count("stomp", "DISCONNECT") == 1


def test_per_object_series_can_be_turned_off(tmp_path):
    from rocketport.core.config import ProtocolConfig
    live = start_live_broker(all_protocols_config(str(tmp_path / "store"),
                                                  http=ProtocolConfig(True, 0, metrics_per_object=False)))
    try:
        kafka_produce(live, "QuietT", 3)
        kafka_consume(live, "QuietT", "QuietG", 3)
        samples = scrape(live)
        assert value(samples, "rocketmq_messages_in_total", protocol="kafka") == 3
        assert not [key for key in samples if any(label in ("topic", "consumer_group") for label, _ in key[1])]
    finally:
        live.stop()


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70_000 + b"\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64),  # a TLS hello
])
def test_malformed_http_gets_an_error_status_and_the_broker_goes_on(live, request_bytes):
    with socket.create_connection(live.endpoint("http"), timeout=TIMEOUT) as sock:
        sock.sendall(request_bytes)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status in (400, 431), answer[:200]
    assert b"connection: close" in answer.lower()
    assert scrape(live)  # the listener and the broker still answer


def test_unknown_paths_and_methods(live):
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(metrics_url(live, "/nothing-here"), timeout=TIMEOUT)
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(urllib.request.Request(metrics_url(live), data=b"x", method="POST"),
                               timeout=TIMEOUT)
    assert posted.value.code == 405
    with pytest.raises(urllib.error.HTTPError) as large:
        urllib.request.urlopen(urllib.request.Request(metrics_url(live), data=b"x" * (128 << 10),
                                                      method="POST"), timeout=TIMEOUT)
    assert large.value.code == 413


def test_pipelined_requests_are_answered_in_order(live):
    with socket.create_connection(live.endpoint("http"), timeout=TIMEOUT) as sock:
        sock.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    first, _, rest = answer.partition(b"\r\n")
    assert first.startswith(b"HTTP/1.1 404")
    assert b"HTTP/1.1 200" in rest and b"rocketmq_messages_in_total" in rest
