"""Kafka front-end throughput: raw pipelined protocol clients, and confluent-kafka beside them.

Run: python bench/kafka_bench.py [--messages N] [--skip-confluent] [--tansu BINARY].
Starts a broker subprocess (`python -m rocketport broker`, uvloop, temp store, ASYNC_FLUSH)
so client and broker use separate processes, then prints one JSON object per line:
{"bench": "kafka", "case": ..., "value": ..., "unit": ..., "floor": ..., "broker": ...},
with the broker's CPU microseconds per message beside throughput rows. With --tansu, every
case runs again against the peer (tansu's memory storage: not durable).

The raw producer sends pre-encoded Produce requests (one batch of 1,000 records each, no
compression, acks=1) with many in flight and counts acknowledged records; the raw fetcher
pipelines Fetch requests over 4 partitions and counts records from the batch headers
without materialising them. Both tell the broker's limits apart from a client library's:
the confluent-kafka figures (linger.ms=5, batch.size=1 MiB, consume(10000); latency: one
message per poll at 10,000 msg/s) include librdkafka's and Python's per-message costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

from crc32c import crc32c

from rocketport.core.batch import HEADER_SIZE, Record, build_batch
from rocketport.core.batch.record_batch import HEADER, iter_records, parse_header, split_batches
from rocketport.protocols.kafka import codec

PARTITIONS = 4
CONSUME_PASSES = 5
RECORDS_PER_BATCH = 1000
IN_FLIGHT = 32
PRODUCE_V = 9
FETCH_V = 12
FETCH_BYTES = 8 << 20
_SIZE = struct.Struct(">i")
_U32 = struct.Struct(">I")


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "kafka", "case": case, "value": round(value, 1), "unit": unit,
                      "floor": floor, **extra}), flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), to tell broker cost from client cost."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BrokerCpu:
    """Broker CPU microseconds per message over one case."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = cpu_seconds(pid)

    def us_per_msg(self, messages: int) -> float:
        used = cpu_seconds(self.pid) - self.start
        self.start = cpu_seconds(self.pid)
        return round(used / messages * 1e6, 3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(store: str, port: int, log: Any, settings: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={store}",
         "--set", f"kafka.port={port}", "--set", "autoCreateTopicEnable=true",
         "--set", f"defaultTopicQueueNums={PARTITIONS}", "--set", "mappedFileSizeCommitLog=268435456",
         *(arg for setting in settings for arg in ("--set", setting))],
        stdout=subprocess.DEVNULL, stderr=log)
    wait_for_port(port, proc)
    return proc


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the broker did not start")


def frame(api_key: int, version: int, correlation: int, body: dict[str, Any]) -> bytes:
    payload = codec.encode_request_header(api_key, version, correlation, "bench") + b"".join(
        bytes(p) for p in codec.encode_request(api_key, version, body))
    return _SIZE.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


async def create_topic(port: int, topic: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(19, 5, 1, {"topics": [{"name": topic, "num_partitions": PARTITIONS,
                                               "replication_factor": 1, "assignments": [], "configs": []}],
                                  "timeout_ms": 10000}))
    await read_frame(reader)
    writer.close()


# --------------------------------------------------------------------------- raw producer
async def raw_produce(port: int, topic: str, size: int, messages: int) -> float:
    """Seconds to have ``messages`` records acknowledged (acks=1), IN_FLIGHT requests deep."""
    batch = build_batch([Record(i, 0, None, bytes(size)) for i in range(RECORDS_PER_BATCH)],
                        base_timestamp=int(time.time() * 1000))
    frames = [frame(0, PRODUCE_V, p, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": batch}]}]}) for p in range(PARTITIONS)]
    requests = messages // RECORDS_PER_BATCH
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    window = asyncio.Semaphore(IN_FLIGHT)

    async def send_all() -> None:
        for i in range(requests):
            await window.acquire()
            writer.write(frames[i % PARTITIONS])
            await writer.drain()

    started = time.perf_counter()
    sender = asyncio.create_task(send_all())
    for _ in range(requests):
        data = await read_frame(reader)
        _, pos = codec.decode_response_header(0, PRODUCE_V, data)
        body = codec.decode_response(0, PRODUCE_V, memoryview(data)[pos:])
        code = body["responses"][0]["partition_responses"][0]["error_code"]
        if code:
            raise RuntimeError(f"produce failed with error {code}")
        window.release()
    elapsed = time.perf_counter() - started
    await sender
    writer.close()
    return elapsed


# --------------------------------------------------------------------------- raw fetcher
def count_records(blob: memoryview, fetch_offset: int) -> tuple[int, int]:
    """(records at or after fetch_offset, next offset) from batch headers only."""
    pos, end, count, next_offset = 0, len(blob), 0, fetch_offset
    while end - pos >= HEADER_SIZE:
        fields = HEADER.unpack_from(blob, pos)
        base, length, last_delta = fields[0], fields[1], fields[6]
        if pos + 12 + length > end:
            break  # a partial batch at the end of the response
        last = base + last_delta
        if last >= fetch_offset:
            count += last - max(base, fetch_offset) + 1
            next_offset = last + 1
        pos += 12 + length
    return count, next_offset


async def raw_fetch(port: int, topic: str, messages: int) -> float:
    """Seconds to read ``messages`` records from offset 0 of every partition, pipelined."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    offsets = [0] * PARTITIONS
    total = 0

    def request(p: int) -> bytes:
        return frame(1, FETCH_V, p, {"max_wait_ms": 500, "min_bytes": 1, "max_bytes": FETCH_BYTES,
                                     "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                                         {"partition": p, "fetch_offset": offsets[p],
                                          "partition_max_bytes": FETCH_BYTES}]}]})

    started = time.perf_counter()
    for p in range(PARTITIONS):
        writer.write(request(p))
    while total < messages:
        data = await read_frame(reader)
        correlation, pos = codec.decode_response_header(1, FETCH_V, data)
        body = codec.decode_response(1, FETCH_V, memoryview(data)[pos:])
        part = body["responses"][0]["partitions"][0]
        n, offsets[correlation] = count_records(part["records"] or memoryview(b""), offsets[correlation])
        total += n
        writer.write(request(correlation))
    elapsed = time.perf_counter() - started
    writer.close()
    return elapsed


# --------------------------------------------------------------------------- raw latency
def _stamped_produce(topic: str, per_tick: int) -> tuple[bytearray, list[int], list[tuple[int, int, int]]]:
    """A Produce (acks=1) of one tick's records, one batch per partition, whose values start
    with a 20-digit send time: (frame, where the digits go, (CRC at, from, to) per batch).
    Stamping it is a digit patch per record and a CRC32C per batch, so the generator's own
    work stays out of the figures."""
    mark = b"%020d" % 0
    values: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
    for i in range(per_tick):
        values[i % PARTITIONS].append(mark + bytes(80))
    batches = [(p, build_batch([Record(i, 0, None, v) for i, v in enumerate(vals)],
                               base_timestamp=int(time.time() * 1000)))
               for p, vals in enumerate(values) if vals]
    template = bytearray(frame(0, PRODUCE_V, 0, {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": p, "records": b} for p, b in batches]}]}))
    marks = [at for at in range(len(template)) if template.startswith(mark, at)]
    spans, start = [], 0
    for _, batch in batches:  # in frame order; batches may be equal, so search onwards
        start = template.find(batch, start)
        spans.append((start + 17, start + 21, start + len(batch)))
        start += len(batch)
    return template, marks, spans


async def raw_latency(port: int, topic: str, rate: int, seconds: float) -> list[float]:
    """Produce→fetch latencies (ms) at ``rate`` msg/s with the raw protocol: every 1 ms a
    Produce carries that millisecond's records, as a linger.ms=0 client sends them, while
    one long-polling Fetch for all partitions (max_wait 100 ms, min_bytes 1) is always
    outstanding on a second connection, as a consumer keeps one per broker."""
    producer_r, producer_w = await asyncio.open_connection("127.0.0.1", port)
    fetch_r, fetch_w = await asyncio.open_connection("127.0.0.1", port)
    per_tick = max(1, rate // 1000)
    ticks = int(rate * seconds) // per_tick
    total = ticks * per_tick
    latencies: list[float] = []
    fetch_w.write(frame(2, 5, 0, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": -1} for p in range(PARTITIONS)]}]}))
    data = await read_frame(fetch_r)
    _, pos = codec.decode_response_header(2, 5, data)
    offsets = [0] * PARTITIONS
    for part in codec.decode_response(2, 5, memoryview(data)[pos:])["topics"][0]["partitions"]:
        offsets[part["partition_index"]] = part["offset"]

    async def consume() -> None:
        while len(latencies) < total:
            fetch_w.write(frame(1, FETCH_V, 0, {
                "max_wait_ms": 100, "min_bytes": 1, "max_bytes": FETCH_BYTES, "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "fetch_offset": offsets[p], "partition_max_bytes": FETCH_BYTES}
                    for p in range(PARTITIONS)]}]}))
            data = await read_frame(fetch_r)
            arrived = time.perf_counter_ns()
            _, pos = codec.decode_response_header(1, FETCH_V, data)
            for part in codec.decode_response(1, FETCH_V, memoryview(data)[pos:])["responses"][0]["partitions"]:
                p, blob = part["partition_index"], part["records"] or b""
                for at, size in split_batches(blob):
                    header = parse_header(blob, at)
                    for record in iter_records(memoryview(blob)[at:at + size]):
                        if header.base_offset + record.offset_delta >= offsets[p]:
                            latencies.append((arrived - int(record.value[:20])) / 1e6)
                    offsets[p] = max(offsets[p], header.base_offset + header.last_offset_delta + 1)

    async def acks() -> None:
        for _ in range(ticks):
            await read_frame(producer_r)

    template, marks, spans = _stamped_produce(topic, per_tick)
    tasks = asyncio.gather(consume(), acks())
    started = time.perf_counter()
    for tick in range(ticks):
        delay = started + tick / 1000 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        now = b"%020d" % time.perf_counter_ns()
        for at in marks:
            template[at:at + 20] = now
        for crc_at, start, end in spans:
            _U32.pack_into(template, crc_at, crc32c(memoryview(template)[start:end]))
        producer_w.write(bytes(template))
    await asyncio.wait_for(tasks, seconds + 30)
    producer_w.close()
    fetch_w.close()
    return sorted(latencies)


# --------------------------------------------------------------------------- confluent-kafka
def confluent_produce(port: int, topic: str, size: int, messages: int, acks: str) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 5, "batch.size": 1 << 20,
                  "acks": acks, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20})
    value = bytes(size)
    started = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.001)
    p.flush(120)
    return time.perf_counter() - started


def confluent_consume(port: int, topic: str, messages: int) -> float:
    """Messages per second after the first batch arrived."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    # librdkafka's fetch sizes (larger ones were measured slower), but a short
    # fetch.queue.backoff.ms: with its default of 1 s, a broker that fills the client's queue
    # past queued.min.messages makes librdkafka idle for a second (measured: 150k vs 450k
    # msg/s for 100 B records, for Rocketport and tansu alike).
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    count = 0
    started = None
    deadline = time.monotonic() + 120
    while count < messages and time.monotonic() < deadline:
        batch = c.consume(10000, 1.0)
        if started is None and batch:
            # librdkafka spends ~0.6 s on start-up (metadata, offsets, first fetch): the
            # clock starts with the first batch, so the figure is the steady rate.
            started = time.perf_counter()
            messages -= len(batch)
            continue
        count += sum(1 for m in batch if not m.error())
    elapsed = time.perf_counter() - (started or time.perf_counter())
    c.close()
    return count / elapsed


def confluent_latency(port: int, topic: str, rate: int, seconds: float) -> list[float]:
    """Produce→consume latencies (ms) at ``rate`` msg/s: each value carries its send time."""
    import threading

    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench-latency",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
    total = int(rate * seconds)
    latencies: list[float] = []

    def consume() -> None:
        deadline = time.monotonic() + seconds + 30
        while len(latencies) < total and time.monotonic() < deadline:
            # poll, not consume(n, timeout): consume waits for n messages or the timeout
            m = c.poll(0.1)
            if m is not None and not m.error():
                latencies.append((time.perf_counter_ns() - int(m.value()[:20])) / 1e6)

    reader = threading.Thread(target=consume)
    reader.start()
    time.sleep(1.0)  # let the consumer's start-up (metadata, offsets, first fetch) finish
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0, "acks": "1"})
    tick = 0.001
    per_tick = max(1, int(rate * tick))
    started = time.perf_counter()
    for i in range(0, total, per_tick):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # sleeping, not spinning: the consumer thread needs the GIL
        for j in range(per_tick):
            p.produce(topic, b"%020d" % time.perf_counter_ns() + bytes(80), partition=(i + j) % PARTITIONS)
        p.poll(0)
    p.flush(30)
    reader.join()
    c.close()
    return sorted(latencies)


def run_cases(port: int, pid: int, broker: str, args: argparse.Namespace) -> None:
    """Every case against the broker listening on ``port``; rows carry the broker's name."""
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    ours = broker == "rocketport"

    def out(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
        emit(case, value, unit, floor if ours else None, broker=broker, **extra)

    cpu = BrokerCpu(pid)
    for size, n in () if args.latency_only else ((100, args.messages), (1024, args.messages // 4)):
        label = "100B" if size == 100 else "1KiB"
        topic = f"raw-{label}"
        run(create_topic(port, topic))
        cpu.us_per_msg(1)
        t = run(raw_produce(port, topic, size, n))
        out(f"produce_{label}_raw", n / t, "msg/s", 1_000_000 if size == 100 else None,
            broker_cpu_us_per_msg=cpu.us_per_msg(n))
        out(f"produce_{label}_raw_mb", n * size / t / 1e6, "MB/s")
        t = run(raw_fetch(port, topic, n))
        out(f"fetch_{label}_raw", n / t, "msg/s", 2_000_000 if size == 100 else None,
            broker_cpu_us_per_msg=cpu.us_per_msg(n))
        out(f"fetch_{label}_raw_mb", n * size / t / 1e6, "MB/s")
    if args.skip_confluent:
        return
    for size, n, acks in () if args.latency_only else (
            (100, args.messages // 2, "1"), (1024, args.messages // 4, "all")):
        label = "100B" if size == 100 else "1KiB"
        topic = f"cf-{label}"
        run(create_topic(port, topic))
        cpu.us_per_msg(1)
        t = confluent_produce(port, topic, size, n, acks)
        out(f"produce_{label}_confluent_acks{acks}", n / t, "msg/s", client_ceiling=870_000,
            broker_cpu_us_per_msg=cpu.us_per_msg(n))
        out(f"produce_{label}_confluent_acks{acks}_mb", n * size / t / 1e6, "MB/s")
        # best of CONSUME_PASSES reads of the same records: one pass is under a second and
        # moves by +-5% from run to run on this 2-core machine, for either broker
        rates = [confluent_consume(port, topic, n) for _ in range(CONSUME_PASSES)]
        out(f"consume_{label}_confluent", max(rates), "msg/s", passes=CONSUME_PASSES,
            broker_cpu_us_per_msg=cpu.us_per_msg(n * CONSUME_PASSES))
    run(create_topic(port, "latency"))
    lat = run(raw_latency(port, "latency", 10_000, 5.0))
    out("latency_p50_10k_raw", lat[len(lat) // 2], "ms")
    out("latency_p99_10k_raw", lat[int(len(lat) * 0.99)], "ms", 5.0)
    lat = confluent_latency(port, "latency", 10_000, 5.0)
    if lat:
        out("latency_p50_10k_confluent", lat[len(lat) // 2], "ms")
        out("latency_p99_10k_confluent", lat[int(len(lat) * 0.99)], "ms", 5.0)


def start_tansu(binary: str, port: int, log: Any) -> subprocess.Popen:
    """The peer: tansu (memory storage, not durable) on ``port``."""
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url],
                            stdout=log, stderr=log)
    wait_for_port(port, proc)
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="records per 100 B case")
    parser.add_argument("--skip-confluent", action="store_true")
    parser.add_argument("--latency-only", action="store_true",
                        help="only the produce->consume latency case, on a fresh broker")
    parser.add_argument("--broker-log", help="file for the brokers' logs (default: discarded)")
    parser.add_argument("--tansu", metavar="BINARY", help="also run every case against tansu")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for Rocketport (e.g. messageIndexEnable=false)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(args.broker_log, "ab")) if args.broker_log else subprocess.DEVNULL
        store = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafka-bench-"))
        brokers = [("rocketport", lambda port: start_broker(os.path.join(store, "store"), port, log, args.set))]
        if args.tansu:
            brokers.append(("tansu", lambda port: start_tansu(args.tansu, port, log)))
        for name, start in brokers:
            port = free_port()
            proc = start(port)
            try:
                run_cases(port, proc.pid, name, args)
            finally:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
