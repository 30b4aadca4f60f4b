"""Kafka front-end throughput: raw pipelined protocol clients, and confluent-kafka beside them.

Run: python bench/kafka_bench.py [--messages N] [--skip-confluent] [--tansu BINARY] [--baseline REV]
[--fetch-sessions-only].
Starts a broker subprocess (`python -m rocketport broker`, uvloop, temp store, ASYNC_FLUSH)
so client and broker use separate processes, then prints one JSON object per line:
{"bench": "kafka", "case": ..., "value": ..., "unit": ..., "floor": ...}, with the broker's
CPU microseconds per message (from an idle broker until it is idle again) beside throughput
rows. With --tansu the peer (tansu's memory storage: not durable) runs beside it, every case
runs against both back to back, and each row carries "peer" and "peer_value". Every case
runs several passes per broker, the brokers taking turns (who goes first alternates):
throughput rows report the best pass with both medians and every pass, latency rows the
median pass and the worst p99.

The raw producer sends pre-encoded Produce requests (one batch of 1,000 records each, no
compression, acks=1) with many in flight and counts acknowledged records; the raw fetcher
pipelines Fetch requests over 4 partitions and counts records from the batch headers
without materialising them. Both tell the broker's limits apart from a client library's:
the confluent-kafka figures (linger.ms=5, batch.size=1 MiB, consume(10000); latency: one
message per poll at 10,000 msg/s) include librdkafka's and Python's per-message costs.
The *_confluent_default rows run confluent-kafka with every setting at librdkafka's default
but bootstrap.servers (and the consumer's group.id and assignment), as users run it; their
floor is the peer's figure from the same run (at least tansu), when a peer runs.

Transactions (Rocketport only, not run against a peer): raw transactional producers
committing 100 B records in transactions of 1,000 beside the raw plain produce of the same
requests (acks=-1, IN_FLIGHT deep): one producer with Kafka's transaction protocol v2 (what a
Kafka 4 client uses with this broker: Produce v12, EndTxn v5, two round trips a
transaction), TXN_PRODUCERS such producers at once (separate transactional ids and
connections: the _x row), and one producer with protocol v1 (AddPartitionsToTxn first, as
librdkafka drives it: the _v1 row), and the same plain requests in those producers' shape
(one in flight on one connection, and on TXN_PRODUCERS connections: the _seq rows; each
transactional row's seq_ratio is against its shape's); then raw fetches of the transactional
topic with isolation_level 0 and 1. Then confluent-kafka (protocol v1) producing in transactions of
1,000 (acks=all, idempotent, tuned as above) beside the same produce without transactions,
and consumer passes with isolation.level read_uncommitted and read_committed. Floors:
transactional produce (protocol v2 rows and confluent) >= 0.7x the plain produce and
read_committed >= 0.8x read_uncommitted, all of this run.
--quick: 100,000 records per 100 B case, two passes, no *_default and no latency rows.

Fetch sessions (--fetch-sessions-only runs just these; against the peer too): one consumer of a
topic of SESSION_PARTITIONS partitions holding SESSION_RECORDS records each, caught up, then
fetching for SESSION_SECONDS with max_wait_ms 0, one request at a time, so every answer is
empty: sessionless (epoch -1, every partition in every request and answer, as librdkafka
always fetches) and through an incremental fetch session (KIP-227: empty requests, empty
answers, as kafka-python and Java fetch). Rows: fetch requests per second, the broker's
CPU microseconds per empty fetch and the size of an answer (answer_bytes: a sessionless
answer lists every partition, Kafka's way; tansu 0.6 answers max_wait_ms 0 with no
partitions at all). A broker answering the session-opening fetch with session_id 0 (tansu
0.6) has no session figure: peer_value null and peer_no_session say so.

--baseline REV: a second Rocketport broker built from commit REV of this repository (git
archive into a temporary directory, put first on the broker's PYTHONPATH) runs as the peer
"baseline", side by side like tansu: before/after rows of a change in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, TypeVar

from crc32c import crc32c
from procs import cpu_seconds, free_port, wait_for_port

from rocketport.common.batch import HEADER_SIZE, Record, build_batch
from rocketport.common.batch.record_batch import (
    ATTR_CONTROL,
    HEADER,
    iter_records,
    parse_header,
    split_batches,
)
from rocketport.protocols.kafka import codec

PARTITIONS = 4
CONSUME_PASSES = 5
PRODUCE_PASSES = 3  # each adds n records to the topic
RAW_PASSES = 3
RAW_TXN_PASSES = 5  # also with --quick: a raw transactional pass takes about a second
RAW_TXN_MESSAGES = 300_000  # at least, so that a raw pass is not over in a tenth of a second
TXN_PRODUCERS = 16  # raw transactional producers at once in the _x row (plain has 32 requests in flight)
LATENCY_PASSES = 3
RECORDS_PER_BATCH = 1000
IN_FLIGHT = 32
PRODUCE_V = 9
FETCH_V = 12
SESSION_PARTITIONS = 1000
SESSION_RECORDS = 5
SESSION_SECONDS = 5.0
FETCH_BYTES = 8 << 20
_SIZE = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_PRODUCER_EPOCH = 51  # where a batch header's producer epoch is (its base sequence follows)
_EPOCH_SEQUENCE = struct.Struct(">hi")
T = TypeVar("T")


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "kafka", "case": case, "value": round(value, 1), "unit": unit,
                      "floor": floor, **extra}), flush=True)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(30)


def start_broker(store: str, port: int, log: Any, settings: list[str],
                 env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={store}",
         "--set", f"kafka.port={port}", "--set", "autoCreateTopicEnable=true", "--set", "amqp.enabled=false", "--set", "stomp.enabled=false",
         "--set", f"defaultTopicQueueNums={PARTITIONS}", "--set", "mappedFileSizeCommitLog=268435456",
         # free ports for the other listeners too: another broker on this machine keeps the defaults
         "--set", f"listenPort={free_port()}", "--set", f"namesrv.port={free_port()}", "--set", "http.port=0",
         *(arg for setting in settings for arg in ("--set", setting))],
        # a baseline's code from its own tree: started in this checkout, ``-m rocketport`` would
        # find this checkout's package first (the working directory precedes PYTHONPATH)
        stdout=subprocess.DEVNULL, stderr=log, env=env,
        cwd=None if env is None else os.path.join(os.path.dirname(env["PYTHONPATH"]), "src"))
    wait_for_port(port, proc)
    return proc


def baseline_env(rev: str, into: str) -> dict[str, str]:
    """An environment whose ``rocketport`` package is commit ``rev`` of this repository: its
    tree (git archive) under ``into``, laid out as the editable install maps it (the shell
    folder is the package, the other folders its subpackages), first on PYTHONPATH."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(into, "src")
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", repo, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    package = os.path.join(into, "pkg", "rocketport")
    os.makedirs(os.path.dirname(package))
    os.symlink(os.path.join(src, "rocketport"), package)
    for folder in ("client", "common", "core", "pipeline", "protocols"):
        link = os.path.join(src, "rocketport", folder)
        if os.path.isdir(os.path.join(src, folder)) and not os.path.exists(link):
            os.symlink(os.path.join(src, folder), link)
    return {**os.environ, "PYTHONPATH": os.path.join(into, "pkg")}


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
        if fields[5] & ATTR_CONTROL:  # a transaction marker: not a record of the topic's
            next_offset = max(next_offset, last + 1)
        elif last >= fetch_offset:
            count += last - max(base, fetch_offset) + 1
            next_offset = last + 1
        pos += 12 + length
    return count, next_offset


async def raw_fetch(port: int, topic: str, messages: int, isolation_level: int = 0) -> float:
    """Seconds to read ``messages`` records from offset 0 of every partition, pipelined
    (``isolation_level`` 1: read_committed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    offsets = [0] * PARTITIONS
    total = 0

    def request(p: int) -> bytes:
        return frame(1, FETCH_V, p, {"max_wait_ms": 500, "min_bytes": 1, "max_bytes": FETCH_BYTES,
                                     "isolation_level": isolation_level, "topics": [{"topic": topic, "partitions": [
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


# --------------------------------------------------------------------------- raw transactions
def _produce_template(topic: str, size: int, per_partition: int, acks: int, transactional_id: str | None = None,
                      producer_id: int = -1, producer_epoch: int = -1,
                      version: int = PRODUCE_V) -> tuple[bytearray, list[int], int]:
    """A Produce request carrying one batch of ``per_partition`` records for every partition
    (as librdkafka sends one request per broker), where each batch starts in it and the
    batches' length: a transaction's epoch and sequences are then a patch and a CRC32C per batch."""
    batch = build_batch([Record(i, 0, None, bytes(size)) for i in range(per_partition)],
                        base_timestamp=int(time.time() * 1000), producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=0 if producer_id >= 0 else -1,
                        transactional=transactional_id is not None)
    template = bytearray(frame(0, version, 0, {
        "transactional_id": transactional_id, "acks": acks, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(PARTITIONS)]}]}))
    starts, at = [], 0
    for _ in range(PARTITIONS):  # the batches are equal: search onwards
        at = template.find(batch, at)
        starts.append(at)
        at += len(batch)
    return template, starts, len(batch)


def _set_sequence(template: bytearray, starts: list[int], size: int, epoch: int, sequence: int) -> bytes:
    """The template with every batch's producer epoch and base sequence set (CRC recomputed)."""
    view = memoryview(template)
    for at in starts:
        _EPOCH_SEQUENCE.pack_into(template, at + _PRODUCER_EPOCH, epoch, sequence)
        _U32.pack_into(template, at + 17, crc32c(view[at + 21:at + size]))
    return bytes(template)


def _check_produce(data: bytes, version: int = PRODUCE_V) -> None:
    _, pos = codec.decode_response_header(0, version, data)
    for part in codec.decode_response(0, version, memoryview(data)[pos:])["responses"][0]["partition_responses"]:
        if part["error_code"]:
            raise RuntimeError(f"produce failed with error {part['error_code']}")


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, api_key: int,
                version: int) -> dict[str, Any]:
    writer.write(request)
    data = await read_frame(reader)
    _, pos = codec.decode_response_header(api_key, version, data)
    return codec.decode_response(api_key, version, memoryview(data)[pos:])


class _TxnProducer:
    """One raw transactional producer: its connection and transactional id, initialised
    (InitProducerId) before any clock starts. ``protocol`` 2 is Kafka's transaction protocol
    v2 (KIP-890 part 2), what a Kafka 4 client uses when ApiVersions finalizes
    transaction.version 2, as this broker does: per transaction one Produce v12 (acks=-1, one
    batch per partition: the broker adds the partitions) and its answer, then EndTxn v5 and its
    answer, which carries the next epoch (whose sequences start at 0). ``protocol`` 1 is
    KIP-98's, as librdkafka and Kafka 3 clients drive it: AddPartitionsToTxn and its answer
    first, the epoch kept and sequences running on across transactions."""

    def __init__(self, protocol: int) -> None:
        self.protocol = protocol

    async def open(self, port: int, topic: str, size: int, per_txn: int) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        txn_id = f"bench-raw-{time.monotonic_ns()}"
        init = await _call(self.reader, self.writer, frame(22, 4, 0, {
            "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}), 22, 4)
        if init["error_code"]:
            raise RuntimeError(f"InitProducerId failed with error {init['error_code']}")
        self.txn_id, self.pid, self.epoch = txn_id, init["producer_id"], init["producer_epoch"]
        self.add = frame(24, 3, 0, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": self.pid,
                                    "v3_and_below_producer_epoch": self.epoch,
                                    "v3_and_below_topics": [{"name": topic, "partitions": list(range(PARTITIONS))}]})
        self.per_partition = per_txn // PARTITIONS
        self.produce_v = 12 if self.protocol == 2 else PRODUCE_V
        self.template, self.starts, self.batch_size = _produce_template(
            topic, size, self.per_partition, -1, txn_id, self.pid, self.epoch, self.produce_v)

    async def commit(self, t: int) -> None:
        """Transaction ``t`` of this producer, committed."""
        reader, writer = self.reader, self.writer
        if self.protocol == 1:
            added = await _call(reader, writer, self.add, 24, 3)
            codes = [r["partition_error_code"] for topic_result in added["results_by_topic_v3_and_below"]
                     for r in topic_result["results_by_partition"]]
            if any(codes):
                raise RuntimeError(f"AddPartitionsToTxn failed: {codes}")
        sequence = 0 if self.protocol == 2 else t * self.per_partition
        writer.write(_set_sequence(self.template, self.starts, self.batch_size, self.epoch, sequence))
        _check_produce(await read_frame(reader), self.produce_v)
        end_v = 5 if self.protocol == 2 else 3
        ended = await _call(reader, writer, frame(26, end_v, 0, {
            "transactional_id": self.txn_id, "producer_id": self.pid, "producer_epoch": self.epoch,
            "committed": True}), 26, end_v)
        if ended["error_code"]:
            raise RuntimeError(f"EndTxn failed with error {ended['error_code']}")
        if self.protocol == 2:
            if ended["producer_id"] != self.pid:
                raise RuntimeError("the producer id moved on (epochs used up): not in a bench")
            self.epoch = ended["producer_epoch"]

    def close(self) -> None:
        self.writer.close()


async def raw_txn_produce(port: int, topic: str, size: int, messages: int, per_txn: int, producers: int = 1,
                          protocol: int = 2) -> float:
    """Seconds to commit ``messages`` records in transactions of ``per_txn`` by ``producers``
    raw transactional producers at once (separate transactional ids and connections, as an
    application with several producers runs them), each ordering its transactions as a
    client must (see _TxnProducer); the clock starts once every producer is initialised."""
    clients = [_TxnProducer(protocol) for _ in range(producers)]
    for client in clients:
        await client.open(port, topic, size, per_txn)
    transactions, rest = divmod(messages // per_txn, producers)

    async def run(client: _TxnProducer, count: int) -> None:
        for t in range(count):
            await client.commit(t)

    started = time.perf_counter()
    await asyncio.gather(*(run(client, transactions + (i < rest)) for i, client in enumerate(clients)))
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    return elapsed


async def raw_plain_produce(port: int, topic: str, size: int, messages: int, per_request: int,
                            in_flight: int = IN_FLIGHT, connections: int = 1) -> float:
    """Seconds to have ``messages`` records acknowledged (acks=-1) in requests shaped as the
    transactional producer's (``per_request`` records, one batch per partition) over
    ``connections`` connections, ``in_flight`` deep each: by default the plain figure the
    transactional one is held against; one in flight, on one connection or on as many as the
    transactional producers', the same requests in the transactional producers' shape (each
    request after the previous answer), so a row can tell the transactions' cost from the
    shape's."""
    template, _, _ = _produce_template(topic, size, per_request // PARTITIONS, -1)
    request = bytes(template)
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    requests, rest = divmod(messages // per_request, connections)

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: int) -> None:
        window = asyncio.Semaphore(in_flight)

        async def send_all() -> None:
            for _ in range(count):
                await window.acquire()
                writer.write(request)
                await writer.drain()

        sender = asyncio.create_task(send_all())
        for _ in range(count):
            _check_produce(await read_frame(reader))
            window.release()
        await sender

    started = time.perf_counter()
    await asyncio.gather(*(run(reader, writer, requests + (i < rest)) for i, (reader, writer) in enumerate(streams)))
    elapsed = time.perf_counter() - started
    for _, writer in streams:
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
                    # one tick's records share one send time: the first record's stands for
                    # the batch, so the client's own cost stays small beside the broker's
                    header = parse_header(blob, at)
                    last = header.base_offset + header.last_offset_delta
                    if last >= offsets[p]:
                        first = next(iter_records(memoryview(blob)[at:at + size]))
                        latency = (arrived - int(first.value[:20])) / 1e6
                        latencies.extend([latency] * (last - max(header.base_offset, offsets[p]) + 1))
                        offsets[p] = last + 1

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
# tuned settings of the confluent-kafka rows; the *_default rows use none of them
PRODUCER_TUNED = {"linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20}
# librdkafka's fetch sizes (larger ones were measured slower), but a short
# fetch.queue.backoff.ms: with its default of 1 s, a client whose queue holds
# queued.min.messages (100,000 for the whole consumer) stops fetching for a second.
CONSUMER_TUNED = {"fetch.queue.backoff.ms": 10, "enable.auto.commit": False}


def confluent_produce(port: int, topic: str, size: int, messages: int, acks: str | None,
                      settings: dict[str, Any] | None = None) -> float:
    """Messages per second, from the first produce() until every message is acknowledged;
    ``acks`` None leaves librdkafka's default (all); ``settings`` default to PRODUCER_TUNED."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **(PRODUCER_TUNED if settings is None else settings),
                  **({} if acks is None else {"acks": acks})})
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
    return messages / (time.perf_counter() - started)


def confluent_consume(port: int, topic: str, messages: int, settings: dict[str, Any] | None = None) -> float:
    """Messages per second after the first batch arrived, assigned from offset 0;
    ``settings`` default to CONSUMER_TUNED."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench",
                  **(CONSUMER_TUNED if settings is None else settings)})
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


@dataclasses.dataclass(slots=True)
class Target:
    """One broker under test."""

    name: str
    port: int
    pid: int


def confluent_txn_produce(port: int, topic: str, size: int, messages: int, per_txn: int) -> float:
    """Messages per second in transactions of ``per_txn`` records, from the first begin until
    the last commit (init_transactions is before the clock starts)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **PRODUCER_TUNED,
                  "transactional.id": f"bench-{time.monotonic_ns()}"})
    p.init_transactions(30)
    value = bytes(size)
    started = time.perf_counter()
    for first in range(0, messages, per_txn):
        p.begin_transaction()
        for i in range(first, min(first + per_txn, messages)):
            while True:
                try:
                    p.produce(topic, value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.001)
        p.commit_transaction(120)
    return messages / (time.perf_counter() - started)


# --------------------------------------------------------------------------- fetch sessions
async def _fill_session_topic(port: int, topic: str) -> None:
    """SESSION_PARTITIONS partitions of SESSION_RECORDS records each, one Produce request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(19, 5, 1, {"topics": [{"name": topic, "num_partitions": SESSION_PARTITIONS,
                                               "replication_factor": 1, "assignments": [], "configs": []}],
                                  "timeout_ms": 10000}))
    await read_frame(reader)
    batch = build_batch([Record(i, 0, None, bytes(100)) for i in range(SESSION_RECORDS)],
                        base_timestamp=int(time.time() * 1000))
    writer.write(frame(0, PRODUCE_V, 2, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(SESSION_PARTITIONS)]}]}))
    data = await read_frame(reader)
    _, pos = codec.decode_response_header(0, PRODUCE_V, data)
    body = codec.decode_response(0, PRODUCE_V, memoryview(data)[pos:])
    if any(p["error_code"] for p in body["responses"][0]["partition_responses"]):
        raise RuntimeError("the session topic's produce failed")
    writer.close()


def _session_fetch(topic: str, session_id: int, epoch: int, offsets: dict[int, int] | None) -> dict[str, Any]:
    return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": FETCH_BYTES, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [],
            "topics": [] if offsets is None else [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20} for p, o in offsets.items()]}]}


class NoSession(Exception):
    """The broker answered a session-opening fetch (epoch 0) with session_id 0."""


async def raw_empty_fetches(port: int, topic: str, sessions: bool, seconds: float) -> tuple[int, int]:
    """Empty fetches answered in ``seconds`` by a caught-up consumer of every partition, one
    request at a time: sessionless, or incremental through a session (``sessions``); and the
    size of the last answer, which tells an answer listing every partition from one listing none."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer_bytes = 0

    async def call(correlation: int, body: dict[str, Any] | bytes) -> dict[str, Any] | None:
        nonlocal answer_bytes
        writer.write(body if isinstance(body, bytes) else frame(1, FETCH_V, correlation, body))
        data = await read_frame(reader)
        answer_bytes = len(data)
        if isinstance(body, bytes):
            return None  # the sessionless answer is not decoded: the client's cost is not the case
        _, pos = codec.decode_response_header(1, FETCH_V, data)
        return codec.decode_response(1, FETCH_V, memoryview(data)[pos:])

    try:
        offsets = dict.fromkeys(range(SESSION_PARTITIONS), SESSION_RECORDS)  # caught up
        first = await call(0, _session_fetch(topic, 0, 0 if sessions else -1, offsets))
        assert first is not None and not first["error_code"]
        if any(p["records"] for t in first["responses"] for p in t["partitions"]):
            raise RuntimeError("the consumer was not caught up")
        session_id, epoch, fetches = first["session_id"], 1, 0
        if sessions and not session_id:
            raise NoSession(f"session_id 0 answering epoch 0 ({answer_bytes} B answer)")
        sessionless = frame(1, FETCH_V, 0, _session_fetch(topic, 0, -1, offsets))
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            if sessions:
                answer = await call(epoch, _session_fetch(topic, session_id, epoch, None))
                assert answer is not None
                if answer["error_code"] or answer["responses"]:
                    raise RuntimeError(f"incremental fetch: error {answer['error_code']}, "
                                       f"{len(answer['responses'])} topics")
                epoch += 1
            else:
                await call(0, sessionless)
            fetches += 1
    finally:
        writer.close()
    return fetches, answer_bytes


def session_rows(targets: list[Target], run: Callable[..., Any]) -> None:
    """Both rows against every broker; a broker that opens no session (answers epoch 0 with
    session_id 0) has no session figure, and its row says so with its answer."""
    topic = "sessions-1000p"
    for target in targets:
        run(_fill_session_topic(target.port, topic))
    for sessions, case in ((False, "fetch_1000p_empty_sessionless"), (True, "fetch_1000p_empty_session")):
        rows: list[dict[str, Any]] = []
        for target in targets:
            wait_idle(target.pid)
            before = cpu_seconds(target.pid)
            try:
                fetches, answer_bytes = run(raw_empty_fetches(target.port, topic, sessions, SESSION_SECONDS))
            except NoSession as e:
                rows.append({"value": None, "no_session": str(e)})
                continue
            wait_idle(target.pid)
            rows.append({"value": fetches / SESSION_SECONDS, "answer_bytes": answer_bytes,
                         "broker_cpu_us_per_fetch": round((cpu_seconds(target.pid) - before) / fetches * 1e6, 1)})
        own = rows[0]
        if own["value"] is None:
            raise RuntimeError(f"rocketport opened no fetch session: {own['no_session']}")
        extra: dict[str, Any] = {"broker_cpu_us_per_fetch": own["broker_cpu_us_per_fetch"],
                                 "answer_bytes": own["answer_bytes"], "partitions": SESSION_PARTITIONS}
        for target, peer in zip(targets[1:], rows[1:]):
            extra.update(peer=target.name, peer_value=None if peer["value"] is None else round(peer["value"], 1),
                         **{f"peer_{k}": v for k, v in peer.items() if k != "value"})
        emit(case, own["value"], "fetch/s", None, **extra)


def wait_idle(pid: int, budget: float = 30.0) -> None:
    """Return once the broker used at most one clock tick of CPU in half a second, so work a
    case left behind (the index builder catching up) is charged to that case and never runs
    during the next one or during the other broker's turn."""
    deadline = time.monotonic() + budget
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last <= 1.5 / os.sysconf("SC_CLK_TCK"):
            return
        last = now


def measure(target: Target, messages: int, case: Callable[..., T], *args: Any) -> tuple[T, float]:
    """``case(port, *args)`` and the broker CPU microseconds per message it cost, from an idle
    broker until the broker is idle again."""
    wait_idle(target.pid)
    before = cpu_seconds(target.pid)
    result = case(target.port, *args)
    wait_idle(target.pid)
    return result, (cpu_seconds(target.pid) - before) / messages * 1e6


def report(case: str, unit: str, floor: float | None, results: list[tuple[float, float | None]],
           targets: list[Target], **extra: Any) -> None:
    """One row: Rocketport's value, and the peer's measured in the same minutes beside it."""
    (value, cpu), peers = results[0], results[1:]
    if cpu is not None:
        extra["broker_cpu_us_per_msg"] = round(cpu, 3)
    for target, (peer_value, peer_cpu) in zip(targets[1:], peers, strict=True):
        extra["peer"], extra["peer_value"] = target.name, round(peer_value, 1)
        if peer_cpu is not None:
            extra["peer_broker_cpu_us_per_msg"] = round(peer_cpu, 3)
    emit(case, value, unit, floor, **extra)


def run_cases(targets: list[Target], args: argparse.Namespace) -> None:
    """Every case against every target back to back, so each row compares the same minutes
    of this (noisy, 2-core) machine; consume passes alternate between the brokers."""
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run

    def blocking(coroutine: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *args: run(coroutine(*args))

    def per_second(coroutine: Callable[..., Any], n: int) -> Callable[..., float]:
        """A raw case (a coroutine taking seconds for ``n`` records) as a blocking msg/s one."""
        return lambda *args: n / run(coroutine(*args))

    def mb(rows: list[tuple[float, float]], size: int) -> list[tuple[float, None]]:
        return [(rate * size / 1e6, None) for rate, _ in rows]

    def alternating(passes: int, messages: int, case: Callable[..., T], *args: Any) -> list[list[tuple[T, float]]]:
        """``passes`` runs of ``case`` per broker, taking turns (who goes first alternates):
        a pass moves by 10-30% here, with the VM's memory and the other process's load."""
        per_target: list[list[tuple[T, float]]] = [[] for _ in targets]
        for i in range(passes):
            for k in (range(len(targets)) if i % 2 == 0 else reversed(range(len(targets)))):
                per_target[k].append(measure(targets[k], messages, case, *args))
        return per_target

    def best(case: str, per_target: list[list[tuple[float, float]]], floor: float | None = None,
             **extra: Any) -> list[tuple[float, float]]:
        """The best pass per broker, reported with both medians and every pass."""
        extra.update(passes=len(per_target[0]), median=round(statistics.median(r for r, _ in per_target[0]), 1),
                     runs=[round(r) for r, _ in per_target[0]])
        if len(targets) > 1:
            extra.update(peer_median=round(statistics.median(r for r, _ in per_target[1]), 1),
                         peer_runs=[round(r) for r, _ in per_target[1]])
        rows = [(max(r for r, _ in runs), sum(c for _, c in runs) / len(runs)) for runs in per_target]
        report(case, "msg/s", floor, rows, targets, **extra)
        return rows

    if args.fetch_sessions_only:
        session_rows(targets, run)
        return
    for size, n in () if args.latency_only else ((100, args.messages), (1024, args.messages // 4)):
        label = "100B" if size == 100 else "1KiB"
        topic = f"raw-{label}"
        for t in targets:
            run(create_topic(t.port, topic))
        produced = best(f"produce_{label}_raw", alternating(RAW_PASSES, n, per_second(raw_produce, n), topic, size, n),
                        1_000_000 if size == 100 else None)
        report(f"produce_{label}_raw_mb", "MB/s", None, mb(produced, size), targets)
        # fetch passes read the topic's first n records, the same ones each time
        fetched = best(f"fetch_{label}_raw", alternating(RAW_PASSES, n, per_second(raw_fetch, n), topic, n),
                       2_000_000 if size == 100 else None)
        report(f"fetch_{label}_raw_mb", "MB/s", None, mb(fetched, size), targets)

    if not args.skip_confluent and not args.latency_only:
        for size, n, acks in ((100, args.messages // 2, "1"), (1024, args.messages // 4, "all")):
            label = "100B" if size == 100 else "1KiB"
            topic = f"cf-{label}"
            for t in targets:
                run(create_topic(t.port, topic))
            produced = best(f"produce_{label}_confluent_acks{acks}",
                            alternating(PRODUCE_PASSES, n, confluent_produce, topic, size, n, acks))
            report(f"produce_{label}_confluent_acks{acks}_mb", "MB/s", None, mb(produced, size), targets)
            # as fetch passes, consume passes read the same first n records
            best(f"consume_{label}_confluent", alternating(CONSUME_PASSES, n, confluent_consume, topic, n))
    if not args.skip_confluent and not args.latency_only and not args.quick:
        # librdkafka's defaults, as users run it: the floor is the peer in the same run
        n, topic = args.messages, "cf-default-100B"
        for t in targets:
            run(create_topic(t.port, topic))
        for case, (passes, fn, *rest) in (
                ("produce_100B_confluent_default", (PRODUCE_PASSES, confluent_produce, 100, n, None, {})),
                ("consume_100B_confluent_default", (CONSUME_PASSES, confluent_consume, n, {}))):
            per_target = alternating(passes, n, fn, topic, *rest)
            floor = round(max(r for r, _ in per_target[1]), 1) if len(targets) > 1 else None
            rows = best(case, per_target, floor)
            if case.startswith("produce"):
                report(f"{case}_mb", "MB/s", None, mb(rows, 100), targets)
    if not args.latency_only and not args.skip_transactions:
        transactional_rows(targets[0], args, run)
    if not args.latency_only:
        session_rows(targets, run)
    if args.quick:
        return
    for t in targets:
        run(create_topic(t.port, "latency"))
    for kind, case in (("raw", blocking(raw_latency)), ("confluent", confluent_latency)):
        if kind == "confluent" and args.skip_confluent:
            continue
        # LATENCY_PASSES passes per broker, taking turns; the row is the median pass, and
        # the worst pass's p99 rides along
        passes = [[lat or [float("nan")] for lat, _ in runs]
                  for runs in alternating(LATENCY_PASSES, 1, case, "latency", 10_000, 5.0)]
        p50 = [sorted(lat[len(lat) // 2] for lat in runs) for runs in passes]
        p99 = [sorted(lat[int(len(lat) * 0.99)] for lat in runs) for runs in passes]
        middle = LATENCY_PASSES // 2
        report(f"latency_p50_10k_{kind}", "ms", None, [(v[middle], None) for v in p50], targets,
               passes=LATENCY_PASSES)
        report(f"latency_p99_10k_{kind}", "ms", 5.0, [(v[middle], None) for v in p99], targets,
               passes=LATENCY_PASSES, worst=p99[0][-1],
               **({"peer_worst": p99[1][-1]} if len(targets) > 1 else {}))


def transactional_rows(target: Target, args: argparse.Namespace, run: Callable[..., Any]) -> None:
    """Transactional produce beside plain produce (both acks=all), then read_committed
    beside read_uncommitted over the transactional topic, on Rocketport alone; the floors
    are fractions of the plain figures of this run. First with the bench's raw clients
    (the broker's figures; each pair's passes alternate, so both see the same minutes of
    the machine), then with confluent-kafka (the library's)."""
    per_txn = 1000
    for topic in ("txn-raw-plain-100B", "txn-raw-100B", "txn-plain-100B", "txn-100B"):
        run(create_topic(target.port, topic))

    def alternated(n: int, *cases: tuple[Any, ...]) -> list[tuple[float, float, list[float]]]:
        """RAW_TXN_PASSES passes of each raw case (coroutine and arguments), the order turning
        by one case every pass, so each case sees the machine's same minutes as the others:
        (best msg/s, mean broker CPU µs per message, every pass) for each."""
        runs: list[list[tuple[float, float]]] = [[] for _ in cases]
        for i in range(RAW_TXN_PASSES):
            for k in [(i + j) % len(cases) for j in range(len(cases))]:
                coroutine, *case_args = cases[k]
                runs[k].append(measure(target, n, lambda port, *a: n / run(coroutine(port, *a)), *case_args))
        return [(max(r for r, _ in rs), sum(c for _, c in rs) / len(rs), [round(r) for r, _ in rs]) for rs in runs]

    n = max(args.messages, RAW_TXN_MESSAGES)
    (plain, plain_cpu, plain_runs), *txn_rows, seq, seq_x = alternated(
        n, (raw_plain_produce, "txn-raw-plain-100B", 100, n, per_txn),
        (raw_txn_produce, "txn-raw-100B", 100, n, per_txn, 1, 2),
        (raw_txn_produce, "txn-raw-100B", 100, n, per_txn, TXN_PRODUCERS, 2),
        (raw_txn_produce, "txn-raw-100B", 100, n, per_txn, 1, 1),
        (raw_plain_produce, "txn-raw-plain-100B", 100, n, per_txn, 1),
        (raw_plain_produce, "txn-raw-plain-100B", 100, n, per_txn, 1, TXN_PRODUCERS))
    emit("produce_100B_raw_acksall_plain", plain, "msg/s", None, broker_cpu_us_per_msg=round(plain_cpu, 3),
         runs=plain_runs, records_per_request=per_txn, in_flight=IN_FLIGHT)
    # the same plain requests one at a time per connection, as the transactional producers send
    for (value, cpu, runs), suffix, connections in ((seq, "", 1), (seq_x, f"_x{TXN_PRODUCERS}", TXN_PRODUCERS)):
        emit(f"produce_100B_raw_acksall_plain_seq{suffix}", value, "msg/s", None,
             broker_cpu_us_per_msg=round(cpu, 3), runs=runs, records_per_request=per_txn, in_flight=1,
             connections=connections, ratio=round(value / plain, 3))
    for (txn, txn_cpu, txn_runs), (suffix, producers, protocol), (shape, _, shape_runs) in zip(txn_rows, (
            ("", 1, 2), (f"_x{TXN_PRODUCERS}", TXN_PRODUCERS, 2), ("_v1", 1, 1)), (seq, seq_x, seq), strict=True):
        emit(f"produce_100B_raw_txn{per_txn}{suffix}", txn, "msg/s", round(0.7 * plain, 1) if protocol == 2 else None,
             broker_cpu_us_per_msg=round(txn_cpu, 3), runs=txn_runs, ratio=round(txn / plain, 3),
             producers=producers, protocol=f"v{protocol}", **_pass_ratios(txn_runs, plain_runs),
             seq_ratio=round(txn / shape, 3),
             seq_median_pass_ratio=_pass_ratios(txn_runs, shape_runs)["median_pass_ratio"])
    # the fetch passes read the transactional topic's first n records (committed, with markers)
    (uncommitted, u_cpu, u_runs), (committed, c_cpu, c_runs) = alternated(
        n, (raw_fetch, "txn-raw-100B", n, 0), (raw_fetch, "txn-raw-100B", n, 1))
    emit("fetch_100B_raw_txn_read_uncommitted", uncommitted, "msg/s", None, broker_cpu_us_per_msg=round(u_cpu, 3),
         runs=u_runs)
    emit("fetch_100B_raw_txn_read_committed", committed, "msg/s", round(0.8 * uncommitted, 1),
         broker_cpu_us_per_msg=round(c_cpu, 3), runs=c_runs, ratio=round(committed / uncommitted, 3),
         **_pass_ratios(c_runs, u_runs))
    if args.skip_confluent:
        return

    n = args.messages // 2
    passes = 2 if args.quick else PRODUCE_PASSES

    def best_of(case: Callable[..., float], *case_args: Any, passes: int = passes) -> tuple[float, float, list[float]]:
        runs = [measure(target, n, case, *case_args) for _ in range(passes)]
        return max(r for r, _ in runs), sum(c for _, c in runs) / len(runs), [round(r) for r, _ in runs]

    plain, plain_cpu, plain_runs = best_of(confluent_produce, "txn-plain-100B", 100, n, "all")
    emit("produce_100B_confluent_acksall_plain", plain, "msg/s", None,
         broker_cpu_us_per_msg=round(plain_cpu, 3), runs=plain_runs)
    txn, txn_cpu, txn_runs = best_of(confluent_txn_produce, "txn-100B", 100, n, per_txn)
    emit(f"produce_100B_confluent_txn{per_txn}", txn, "msg/s", round(0.7 * plain, 1),
         broker_cpu_us_per_msg=round(txn_cpu, 3), runs=txn_runs, ratio=round(txn / plain, 3))
    # every consume pass reads the first n records of the transactional topic
    consume_passes = 2 if args.quick else CONSUME_PASSES
    uncommitted, u_cpu, u_runs = best_of(confluent_consume, "txn-100B", n,
                                         {**CONSUMER_TUNED, "isolation.level": "read_uncommitted"},
                                         passes=consume_passes)
    emit("consume_100B_confluent_txn_read_uncommitted", uncommitted, "msg/s", None,
         broker_cpu_us_per_msg=round(u_cpu, 3), runs=u_runs)
    committed, c_cpu, c_runs = best_of(confluent_consume, "txn-100B", n,
                                       {**CONSUMER_TUNED, "isolation.level": "read_committed"},
                                       passes=consume_passes)
    emit("consume_100B_confluent_txn_read_committed", committed, "msg/s", round(0.8 * uncommitted, 1),
         broker_cpu_us_per_msg=round(c_cpu, 3), runs=c_runs, ratio=round(committed / uncommitted, 3))


def _pass_ratios(runs: list[float], base_runs: list[float]) -> dict[str, Any]:
    """Each pass against its partner (the passes of a pair ran back to back) and their
    median: on this VM one pass can run 3x another, so the pairs say more than the best
    against the best."""
    ratios = [round(r / b, 3) for r, b in zip(runs, base_runs, strict=True)]
    return {"pass_ratios": ratios, "median_pass_ratio": statistics.median(ratios)}


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
    parser.add_argument("--skip-transactions", action="store_true", help="no transactional rows")
    parser.add_argument("--quick", action="store_true",
                        help="100,000 records per 100 B case, two passes, no *_default and no latency rows")
    parser.add_argument("--latency-only", action="store_true",
                        help="only the produce->consume latency case, on a fresh broker")
    parser.add_argument("--broker-log", help="file for the brokers' logs (default: discarded)")
    parser.add_argument("--tansu", metavar="BINARY", help="also run every case against tansu, side by side")
    parser.add_argument("--fetch-sessions-only", action="store_true",
                        help="only the fetch-session rows (a consumer of 1,000 partitions)")
    parser.add_argument("--baseline", metavar="REV",
                        help="also run every case against a broker built from commit REV, side by side")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for Rocketport (e.g. messageIndexEnable=false)")
    args = parser.parse_args()
    if args.quick:
        args.messages = min(args.messages, 100_000)
        global CONSUME_PASSES, PRODUCE_PASSES, RAW_PASSES
        CONSUME_PASSES = PRODUCE_PASSES = RAW_PASSES = 2
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(args.broker_log, "ab")) if args.broker_log else subprocess.DEVNULL
        store = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafka-bench-"))
        port = free_port()
        proc = start_broker(os.path.join(store, "store"), port, log, args.set)
        stack.callback(stop, proc)
        targets = [Target("rocketport", port, proc.pid)]
        if args.baseline:
            env = baseline_env(args.baseline, os.path.join(store, "baseline"))
            port = free_port()
            proc = start_broker(os.path.join(store, "baseline-store"), port, log, args.set, env)
            stack.callback(stop, proc)
            targets.append(Target(f"baseline {args.baseline}", port, proc.pid))
        if args.tansu:
            port = free_port()
            proc = start_tansu(args.tansu, port, log)
            stack.callback(stop, proc)
            targets.append(Target("tansu", port, proc.pid))
        run_cases(targets, args)


if __name__ == "__main__":
    main()
