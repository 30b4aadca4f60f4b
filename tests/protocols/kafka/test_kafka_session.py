"""The Kafka session over live sockets: ordering, acks=0, bad input, produce/fetch edge cases."""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.common.batch import Record, build_batch, iter_records
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import APIS, ApiKey
from tests.support.live_broker import LiveBroker

from .kafka_raw import FETCH_V, PRODUCE_V, RawClient, encode_batch


def create_topic(live: LiveBroker, name: str, partitions: int = 1) -> None:
    live.run(lambda: live.server.broker.create_topic(name, read_queue_nums=partitions,
                                                     write_queue_nums=partitions))


def assert_serving(live: LiveBroker) -> None:
    with RawClient(live.port) as client:
        r = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert r["error_code"] == 0


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x04abcd",  # a frame too short for a request header
    struct.pack(">i", 1 << 30) + b"x" * 16,  # an oversize frame
    struct.pack(">i", -5),  # a negative length
    struct.pack(">ihhi", 12, 3, 9, 1) + b"\xff\xff\xff\xff",  # Metadata v9 with a garbled body
    struct.pack(">ihhi", 8, 999, 0, 1),  # an API this broker does not serve
])
def test_bad_input_closes_only_that_connection(any_loop_broker, garbage):
    other = RawClient(any_loop_broker.port)
    sock = socket.create_connection(("127.0.0.1", any_loop_broker.port), timeout=5)
    sock.sendall(garbage)
    assert closed_by_peer(sock)
    sock.close()
    r = other.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
    assert r["brokers"][0]["port"] == any_loop_broker.port
    other.sock.close()
    assert_serving(any_loop_broker)


def test_api_versions_v0_header_and_unsupported_version(any_loop_broker):
    with RawClient(any_loop_broker.port) as client:
        r = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        versions = {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}
        assert versions[ApiKey.PRODUCE] == (0, 13) and versions[ApiKey.FETCH] == (0, 17)
        assert versions[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)  # librdkafka needs v1 for group.protocol=consumer
        assert all(low == 0 for low, _ in versions.values())
        assert 71 not in versions  # no telemetry: clients would poll it
        client.send_raw(ApiKey.API_VERSIONS, 99, b"\x00")
        correlation, body = client.receive(ApiKey.API_VERSIONS, 0)
        assert correlation == client.correlation
        assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert any(a["api_key"] == ApiKey.API_VERSIONS for a in body["api_keys"])


def test_pipelined_requests_answered_in_order_and_acks0_silent(any_loop_broker):
    create_topic(any_loop_broker, "pipe")
    with RawClient(any_loop_broker.port) as client:
        # A long-polling fetch first: the produces behind it are stored while it waits,
        # which wakes it; then every answer comes back in request order.
        fetch = {"max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                 "topics": [{"topic": "pipe", "partitions": [
                     {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
        sent = [client.send(ApiKey.FETCH, FETCH_V, fetch)]
        client.send(ApiKey.PRODUCE, PRODUCE_V, client.produce_body("pipe", 0, encode_batch([b"silent"]), acks=0))
        for i in range(5):
            sent.append(client.send(ApiKey.PRODUCE, PRODUCE_V,
                                    client.produce_body("pipe", 0, encode_batch([b"m%d" % i]))))
        started = time.monotonic()
        correlation, fetched = client.receive(ApiKey.FETCH, FETCH_V)
        assert correlation == sent[0]
        assert time.monotonic() - started < 4  # woken by the produce, not by the timeout
        assert fetched["responses"][0]["partitions"][0]["records"]
        offsets = []
        for expected in sent[1:]:
            correlation, body = client.receive(ApiKey.PRODUCE, PRODUCE_V)
            assert correlation == expected
            offsets.append(body["responses"][0]["partition_responses"][0]["base_offset"])
        assert offsets == [1, 2, 3, 4, 5]  # the acks=0 batch took offset 0, unanswered


def test_fetch_long_poll_times_out_empty(any_loop_broker):
    create_topic(any_loop_broker, "idle")
    with RawClient(any_loop_broker.port) as client:
        started = time.monotonic()
        p = client.fetch("idle", 0, 0, max_wait_ms=300)
        assert time.monotonic() - started >= 0.25
        assert p["error_code"] == 0 and len(p["records"]) == 0 and p["high_watermark"] == 0


def test_corrupt_batch_stores_nothing(any_loop_broker):
    create_topic(any_loop_broker, "crc")
    good = encode_batch([b"ok"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with RawClient(any_loop_broker.port) as client:
        assert client.produce("crc", 0, bytes(bad))[0] == ErrorCode.CORRUPT_MESSAGE
        assert client.produce("crc", 0, good + bytes(bad))[0] == ErrorCode.CORRUPT_MESSAGE
        assert client.produce("crc", 0, good[:-3])[0] == ErrorCode.CORRUPT_MESSAGE
        assert client.produce("nope", 0, good)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert client.produce("crc", 7, good)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert any_loop_broker.run(any_loop_broker.server.broker.max_offset, "crc", 0) == 0


def test_compression_bomb_is_refused_and_stores_nothing(any_loop_broker):
    # 80 records of 1 MiB of zeros: a few KiB on the wire, 80 MiB once decompressed
    create_topic(any_loop_broker, "bomb")
    bomb = encode_batch([bytes(1024 * 1024)] * 80, compression=4)  # zstd
    assert len(bomb) < 64 * 1024
    with RawClient(any_loop_broker.port) as client:
        assert client.produce("bomb", 0, bomb)[0] == ErrorCode.CORRUPT_MESSAGE
        assert client.produce("bomb", 0, encode_batch([b"ok"], compression=4))[0] == ErrorCode.NONE
    assert any_loop_broker.run(any_loop_broker.server.broker.max_offset, "bomb", 0) == 1


def test_message_too_large(tmp_path):
    from tests.support.kafka import start_broker

    live = start_broker(str(tmp_path / "store"), max_message_size=4096)
    try:
        create_topic(live, "big")
        with RawClient(live.port) as client:
            assert client.produce("big", 0, encode_batch([b"x" * 8000]))[0] == ErrorCode.MESSAGE_TOO_LARGE
            assert client.produce("big", 0, encode_batch([b"x" * 100])) == (0, 0)
    finally:
        live.stop()


def test_fetch_partition_max_bytes_and_out_of_range(any_loop_broker):
    create_topic(any_loop_broker, "fmb")
    with RawClient(any_loop_broker.port) as client:
        for i in range(10):
            assert client.produce("fmb", 0, encode_batch([b"r%d" % i * 50])) == (0, i)
        small = client.fetch("fmb", 0, 0, max_bytes=10)  # smaller than one batch: one whole batch
        assert [r.value for r in iter_records(bytes(small["records"]))] == [b"r0" * 50]
        all_ = client.fetch("fmb", 0, 4)
        assert small["high_watermark"] == all_["high_watermark"] == 10
        assert len(all_["records"]) == 6 * len(small["records"])
        assert client.fetch("fmb", 0, 11)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert client.fetch("fmb", 3, 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # DeleteRecords moves the log start: earlier offsets are out of range
        r = client.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": "fmb", "partitions": [
            {"partition_index": 0, "offset": 4}]}], "timeout_ms": 1000})
        assert r["topics"][0]["partitions"][0]["low_watermark"] == 4
        assert client.fetch("fmb", 0, 2)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert client.fetch("fmb", 0, 4)["log_start_offset"] == 4


def test_list_offsets(any_loop_broker):
    create_topic(any_loop_broker, "lo")
    with RawClient(any_loop_broker.port) as client:
        before = int(time.time() * 1000) - 1
        for i in range(3):
            client.produce("lo", 0, encode_batch([b"a", b"b"]))
        body = {"replica_id": -1, "isolation_level": 1, "topics": [{"name": "lo", "partitions": [
            {"partition_index": 0, "timestamp": ts} for ts in (-2, -1, before, before + 3_600_000)]}]}
        parts = client.request(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"]
        assert [p["offset"] for p in parts] == [0, 6, 0, -1]


def test_list_offsets_by_the_records_own_timestamps(any_loop_broker):
    # a replay of old data: record timestamps far from the store time, several per batch
    create_topic(any_loop_broker, "lots")
    batches = [(1_000, [0, 10, 20]), (2_000, [0, 10]), (3_000, [0])]
    with RawClient(any_loop_broker.port) as client:
        for base, deltas in batches:
            records = [Record(i, d, None, b"v", []) for i, d in enumerate(deltas)]
            assert client.produce("lots", 0, build_batch(records, base_timestamp=base))[0] == ErrorCode.NONE
        asked = [0, 1_000, 1_015, 1_021, 2_005, 3_000, 3_001]
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "lots", "partitions": [
            {"partition_index": 0, "timestamp": ts} for ts in asked]}]}
        parts = client.request(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"]
    assert [(p["offset"], p["timestamp"]) for p in parts] == [
        (0, 1_000), (0, 1_000), (2, 1_020), (3, 2_000), (4, 2_010), (5, 3_000), (-1, -1)]


_SERVED = [(key, v) for key, api in APIS.items() for v in range(api.versions[0], api.versions[1] + 1)]


def _frame(api_key: int, api_version: int, body: bytes) -> bytes:
    """A well-framed request with client id "x" and an arbitrary body."""
    payload = struct.pack(">hhi", api_key, api_version, 7) + b"\x00\x01x" + body
    return struct.pack(">i", len(payload)) + payload


def _exchange(port: int, data: bytes) -> None:
    """Send ``data``, half-close, and read until the broker closes (bounded by the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(
    st.binary(max_size=300),
    st.builds(lambda api, body: _frame(api[0], api[1], body), st.sampled_from(_SERVED), st.binary(max_size=200)),
))
def test_fuzzed_input_never_stops_the_broker(live_broker, caplog, data):
    _exchange(live_broker.port, data)
    assert_serving(live_broker)
    # bad input is the client's fault: it may be logged as a warning, never as a broker error
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("rocketport")]


def test_in_flight_requests_are_bounded(any_loop_broker):
    """Past max_in_flight pipelined requests the session stops reading; it resumes as they finish."""
    from rocketport.protocols.kafka.session import DEFAULT_MAX_IN_FLIGHT

    create_topic(any_loop_broker, "held")
    fetch = {"max_wait_ms": 1500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "topics": [{"topic": "held", "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    wanted = DEFAULT_MAX_IN_FLIGHT + 40
    with RawClient(any_loop_broker.port) as client:
        sent = [client.send(ApiKey.FETCH, FETCH_V, fetch) for _ in range(wanted)]
        deadline = time.monotonic() + 5
        held = []
        while time.monotonic() < deadline:
            held = any_loop_broker.run(
                lambda: [(len(s._queue), s._read_paused) for s in any_loop_broker.server.front_ends["kafka"].sessions])
            if held and held[0][0] == DEFAULT_MAX_IN_FLIGHT:
                break
            time.sleep(0.05)
        assert held == [(DEFAULT_MAX_IN_FLIGHT, True)]
        received = [client.receive(ApiKey.FETCH, FETCH_V)[0] for _ in range(wanted)]
        assert received == sent


def test_find_coordinator_with_no_keys_is_answered(live_broker):
    with RawClient(live_broker.port) as client:
        response = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": []})
    assert response["coordinators"] == []
    assert_serving(live_broker)
