"""A minimal blocking Kafka client over the codec, for tests that need exact bytes on the wire
(sequence numbers, corrupt batches, pipelining) that real clients will not produce."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from rocketport.common.batch import Record, build_batch
from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.schema import ApiKey

PRODUCE_V = 9
FETCH_V = 12


def encode_batch(values: list[bytes], *, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, compression: int = 0,
                 headers: list[tuple[str, bytes | None]] | None = None, key: bytes | None = None) -> bytes:
    records = [Record(i, 0, key, v, list(headers or [])) for i, v in enumerate(values)]
    return build_batch(records, base_timestamp=int(time.time() * 1000), compression=compression,
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)


class RawClient:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.correlation = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        return self.send_raw(api_key, version,
                             b"".join(bytes(p) for p in codec.encode_request(api_key, version, body)))

    def send_raw(self, api_key: int, version: int, body: bytes) -> int:
        """A request with a hand-made body (for versions the codec does not serve)."""
        correlation, frame = self.frame(api_key, version, body)
        self.sock.sendall(frame)
        return correlation

    def frame(self, api_key: int, version: int, body: bytes | dict[str, Any]) -> tuple[int, bytes]:
        """The next request's correlation id and bytes, unsent (a test that pipelines
        several requests in one write sends their frames together)."""
        if isinstance(body, dict):
            body = b"".join(bytes(p) for p in codec.encode_request(api_key, version, body))
        self.correlation += 1
        payload = codec.encode_request_header(api_key, version, self.correlation, "raw-test") + body
        return self.correlation, struct.pack(">i", len(payload)) + payload

    def receive(self, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        correlation, pos = codec.decode_response_header(api_key, version, frame)
        return correlation, codec.decode_response(api_key, version, memoryview(frame)[pos:])

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        sent = self.send(api_key, version, body)
        correlation, response = self.receive(api_key, version)
        assert correlation == sent
        return response

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    # ------------------------------------------------------------------ conveniences
    def init_producer_id(self) -> tuple[int, int]:
        r = self.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert r["error_code"] == 0
        return r["producer_id"], r["producer_epoch"]

    def produce_body(self, topic: str, partition: int, batch: bytes, acks: int = 1) -> dict[str, Any]:
        return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}

    def produce(self, topic: str, partition: int, batch: bytes) -> tuple[int, int]:
        """(error code, base offset)."""
        r = self.request(ApiKey.PRODUCE, PRODUCE_V, self.produce_body(topic, partition, batch))
        p = r["responses"][0]["partition_responses"][0]
        return p["error_code"], p["base_offset"]

    def fetch(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0,
              min_bytes: int = 1, max_bytes: int = 1 << 20) -> dict[str, Any]:
        body = {"max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
                "isolation_level": 1,
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                            "partition_max_bytes": max_bytes}]}]}
        return self.request(ApiKey.FETCH, FETCH_V, body)["responses"][0]["partitions"][0]
