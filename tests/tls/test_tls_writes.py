"""Large answers over TLS to a reader that stalls: every byte arrives, in request order.

A Kafka Fetch answer of several MiB over a TLS port goes out in record-sized pieces while
the socket takes them and waits while it is full (protocols/tls_writer.py); a client with a
small receive buffer that reads nothing for a while makes the broker's writing pause and
resume many times within one answer."""

from __future__ import annotations

import socket
import ssl
import struct
import time

from rocketport.common.batch import HEADER_SIZE, Record, build_batch
from rocketport.common.batch.record_batch import iter_records
from rocketport.protocols.kafka import codec
from tests.tls.certs import Pki

TOPIC = "big-tls"
BATCHES, PER_BATCH, VALUE = 12, 500, 1000  # 6,000 records, about 6 MiB in one partition
FETCH_BYTES = 32 << 20
_SIZE = struct.Struct(">i")


def _frame(api_key: int, version: int, correlation: int, body: dict) -> bytes:
    payload = codec.encode_request_header(api_key, version, correlation, "t") + b"".join(
        bytes(p) for p in codec.encode_request(api_key, version, body))
    return _SIZE.pack(len(payload)) + payload


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        assert chunk, "the broker closed the connection"
        out += chunk
    return bytes(out)


def _answer(sock: socket.socket, api_key: int, version: int) -> tuple[int, dict]:
    (size,) = _SIZE.unpack(_exactly(sock, 4))
    data = _exactly(sock, size)
    correlation, pos = codec.decode_response_header(api_key, version, data)
    return correlation, codec.decode_response(api_key, version, memoryview(data)[pos:])


def _fill(port: int) -> None:
    """The topic, then BATCHES batches of PER_BATCH records whose values number them."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(_frame(19, 5, 0, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": []}], "timeout_ms": 10000}))
        _answer(sock, 19, 5)
        now = int(time.time() * 1000)
        for b in range(BATCHES):
            records = [Record(i, 0, None, b"%08d" % (b * PER_BATCH + i) + bytes(VALUE - 8)) for i in range(PER_BATCH)]
            sock.sendall(_frame(0, 9, b, {"transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": 0, "records": build_batch(records, base_timestamp=now)}]}]}))
            _, body = _answer(sock, 0, 9)
            assert body["responses"][0]["partition_responses"][0]["error_code"] == 0


def _values(records: memoryview) -> list[int]:
    out, pos = [], 0
    while len(records) - pos >= HEADER_SIZE:
        (length,) = _SIZE.unpack_from(records, pos + 8)
        out.extend(int(r.value[:8]) for r in iter_records(records[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def test_a_large_fetch_over_tls_reaches_a_stalled_reader_whole_and_in_order(tls_broker, pki: Pki):
    _fill(tls_broker.endpoint("kafka")[1])
    fetch = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": FETCH_BYTES, "isolation_level": 0,
             "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                         "partition_max_bytes": FETCH_BYTES}]}]}
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # before connecting: a small window
    raw.settimeout(30)
    raw.connect(("127.0.0.1", tls_broker.endpoint("kafka (tls)")[1]))
    context = ssl.create_default_context(cafile=pki.ca)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        # two whole-partition fetches and a small request between and after them, pipelined
        tls.sendall(_frame(1, 12, 1, fetch) + _frame(18, 3, 2, {}) + _frame(1, 12, 3, fetch)
                    + _frame(18, 3, 4, {}))
        time.sleep(0.5)  # read nothing: the broker's socket fills and its writing pauses
        expected = list(range(BATCHES * PER_BATCH))
        for correlation in (1, 2, 3, 4):
            if correlation % 2:
                got, body = _answer(tls, 1, 12)
                partition = body["responses"][0]["partitions"][0]
                assert partition["error_code"] == 0
                assert _values(memoryview(partition["records"])) == expected
            else:
                got, body = _answer(tls, 18, 3)
                assert body["error_code"] == 0
            assert got == correlation
