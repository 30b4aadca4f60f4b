"""Micro-benchmarks of the Kafka hot paths: record batch decode/build, Produce decode, Fetch encode.

Run: python bench/kafka_codec.py. Prints the best of several rounds, so figures are the
cost of the code, not of a noisy neighbour. Shows that codec cost is O(fields): a 1 MiB
record blob costs the same as a 1 KiB one.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from rocketport.common.batch import Record, build_batch, iter_records
from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.connection import KafkaServerConnection

TS = 1_700_000_000_000


def best_us(fn: Callable[[], object], rounds: int = 5, number: int = 200) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def produce_frame(records: bytes) -> bytes:
    body = {"acks": -1, "timeout_ms": 30000, "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": records}]}]}
    payload = codec.encode_request_header(0, 9, 1, "bench") + b"".join(codec.encode_request(0, 9, body))
    return struct.pack(">i", len(payload)) + payload


def main() -> None:
    recs = [Record(i, 0, None, bytes(100)) for i in range(1000)]
    batch = build_batch(recs, base_timestamp=TS)
    us = best_us(lambda: list(iter_records(batch)), number=30)
    print(f"record batch decode, 1000 x 100 B, uncompressed: {us:8.0f} us  ({1000 / us * 1e6:,.0f} records/s)")
    us = best_us(lambda: build_batch(recs, base_timestamp=TS), number=30)
    print(f"record batch build,  1000 x 100 B, uncompressed: {us:8.0f} us  ({1000 / us * 1e6:,.0f} records/s)")

    for size in (1024, 1 << 20):
        blob = bytes(size)
        frame = produce_frame(blob)
        _, pos = codec.decode_request_header(frame[4:])
        body = memoryview(frame)[4 + pos :]
        us = best_us(lambda: codec.decode_request(0, 9, body))
        print(f"Produce v9 request body decode, {size:>8} B records: {us:6.1f} us")
        us = best_us(lambda: KafkaServerConnection().receive_data(frame))
        print(f"Produce v9 frame -> RequestReceived (one chunk), {size:>8} B records: {us:6.1f} us")
        conn = KafkaServerConnection()
        chunks = [frame[i : i + 65536] for i in range(0, len(frame), 65536)]

        def in_chunks() -> None:
            for chunk in chunks:
                conn.receive_data(chunk)

        us = best_us(in_chunks, number=50)
        print(f"Produce v9 frame in 64 KiB reads -> event, {size:>8} B records: {us:6.1f} us (includes the one join copy)")

        view = memoryview(blob)
        response = {"responses": [{"topic": "bench", "partitions": [
            {"partition_index": 0, "high_watermark": 1000, "records": [view]}]}]}
        conn = KafkaServerConnection()
        us = best_us(lambda: conn.send_response(1, 1, 12, response))
        print(f"Fetch v12 response encode+frame, {size:>8} B records: {us:6.1f} us")


if __name__ == "__main__":
    main()
