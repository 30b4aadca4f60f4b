"""SIGKILL durability soak: acknowledged messages survive a broker killed at random moments.

Run: python bench/crash_soak.py [--cycles N] [--seed S] [--dir DIR] [--set KEY=VALUE ...]
     python bench/crash_soak.py --cycles 1 --sabotage   (the checker's own check: exits 1)

Starts a real broker process (`python -m rocketport broker`, SYNC_FLUSH, a temporary store,
free loopback ports) and repeats N cycles of:

1. produce continuously over both protocols, every send acknowledged and unique: Kafka
   Produce with acks=all (a raw client, several requests in flight per connection, 1-8
   records a batch) and remoting SEND_MESSAGE_V2 sync sends (several in flight per
   connection); a payload counts as acknowledged once its success response was read;
2. SIGKILL the broker at a random moment (--min-run..--max-run seconds in);
3. restart it on the same store, read everything back (Kafka Fetch from offset 0 of every
   partition, remoting PULL_MESSAGE from offset 0 of every queue) and check: every payload
   ever acknowledged is there; nothing is there that was never sent (a torn or corrupt
   record served); offsets are dense. Duplicates are counted (the raw clients never retry,
   so a duplicate would be the broker's).

The next cycle produces to the restarted broker; each check covers every earlier cycle.
Prints one JSON object per measurement and line, e.g.
    {"bench": "crash_soak", "case": "acked_lost_kafka", "value": 0, "unit": "count", ...}
for acked_lost_*, duplicates_* and cycles_* of kafka and remoting, with the totals (acked,
read, unacknowledged sends found stored, corrupt, offset gaps) beside each. Progress goes to
stderr. Exits 1 if an acknowledged message was lost or a corrupt one served, 2 if the
broker could not be started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rocketport.core.batch import Record, build_batch, iter_records
from rocketport.core.batch.record_batch import split_batches, verify_crc
from rocketport.protocols.kafka import codec
from rocketport.protocols.remoting.client import RemotingClient, RemotingClientError, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from rocketport.protocols.remoting.messages import decode_message_ext_records

KAFKA_TOPIC = "soak_kafka"
REMOTING_TOPIC = "soak_remoting"
QUEUES = 4  # partitions of the Kafka topic, queues of the remoting topic
CONNECTIONS = 2  # per protocol
WINDOW = 4  # requests in flight per connection
PRODUCE_V = 9
FETCH_V = 12
CREATE_TOPICS_V = 5
START_TIMEOUT_S = 60
READ_TIMEOUT_S = 60
SABOTAGE_BYTES = 64 * 1024  # what --sabotage zeroes at the CommitLog's end
_SIZE = struct.Struct(">i")


def emit(case: str, value: int, **extra: Any) -> None:
    print(json.dumps({"bench": "crash_soak", "case": case, "value": value, "unit": "count",
                      **extra}), flush=True)


def note(text: str) -> None:
    print(f"crash_soak: {text}", file=sys.stderr, flush=True)


@dataclass
class Ledger:
    """What one protocol's producers sent and what the broker acknowledged, over all cycles."""

    sent: set[bytes] = field(default_factory=set)
    acked: set[bytes] = field(default_factory=set)
    lost: set[bytes] = field(default_factory=set)  # acked, then missing at some check
    duplicates: int = 0  # the most copies beyond the first seen at any check
    corrupt: int = 0  # payloads read that were never sent, or batches failing their CRC
    gaps: int = 0  # offsets missing or out of order
    read: int = 0  # payloads read at the last check
    unacked_found: int = 0  # sent, never acknowledged, but stored (allowed)
    cycles: int = 0


# ------------------------------------------------------------------ the broker process
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """One store, one broker process at a time, on loopback ports chosen here (a broker
    given port 0 does not say outside which port it got)."""

    def __init__(self, store: str, log_path: str, settings: list[str]) -> None:
        self.store = store
        self.log_path = log_path
        self.settings = settings
        self.proc: subprocess.Popen | None = None
        self.kafka_port = self.remoting_port = 0

    def start(self) -> None:
        for attempt in range(3):  # a port taken between choosing and binding: choose again
            self.kafka_port, self.remoting_port = free_port(), free_port()
            args = [sys.executable, "-m", "rocketport", "broker",
                    "--set", f"storePathRootDir={self.store}",
                    "--set", "flushDiskType=SYNC_FLUSH",
                    "--set", f"listenPort={self.remoting_port}",
                    "--set", f"kafka.port={self.kafka_port}",
                    "--set", "namesrv.port=0", "--set", "amqp.enabled=false", "--set", "stomp.enabled=false",
                    # small segments: CommitLog and ConsumeQueue rolls happen during the soak
                    "--set", "mappedFileSizeCommitLog=4194304",
                    "--set", "mappedFileSizeConsumeQueue=40960",
                    "--set", f"defaultTopicQueueNums={QUEUES}",
                    *(arg for s in self.settings for arg in ("--set", s))]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
            if self._wait_listening():
                return
            self.proc.kill()
            self.proc.wait(30)
        with open(self.log_path, "rb") as log:  # the work directory may not outlive the run
            tail = log.read()[-2000:].decode("utf-8", "replace")
        raise RuntimeError(f"the broker did not start; the end of {self.log_path}:\n{tail}")

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = {self.kafka_port, self.remoting_port}
        while pending and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            for port in list(pending):
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    pending.discard(port)
            if pending:
                time.sleep(0.05)
        return not pending

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


# ------------------------------------------------------------------ Kafka
def kafka_frame(api_key: int, version: int, correlation: int, body: dict[str, Any]) -> bytes:
    payload = codec.encode_request_header(api_key, version, correlation, "crash-soak") + b"".join(
        bytes(p) for p in codec.encode_request(api_key, version, body))
    return _SIZE.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


async def kafka_call(port: int, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(kafka_frame(api_key, version, 1, body))
        data = await asyncio.wait_for(read_frame(reader), 30)
        _, pos = codec.decode_response_header(api_key, version, data)
        return codec.decode_response(api_key, version, memoryview(data)[pos:])
    finally:
        writer.close()


async def create_topics(port: int) -> None:
    """Both topics, QUEUES each (topics are shared by every protocol)."""
    body = {"topics": [{"name": name, "num_partitions": QUEUES, "replication_factor": 1,
                        "assignments": [], "configs": []} for name in (KAFKA_TOPIC, REMOTING_TOPIC)],
            "timeout_ms": 10000}
    response = await kafka_call(port, 19, CREATE_TOPICS_V, body)
    for topic in response["topics"]:
        if topic["error_code"] not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"cannot create {topic['name']}: error {topic['error_code']}")


async def kafka_producer(port: int, tag: bytes, ledger: Ledger, rng: random.Random) -> None:
    """Produce batches (acks=all) with WINDOW in flight until the connection dies."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    window = asyncio.Semaphore(WINDOW)
    pending: dict[int, list[bytes]] = {}

    async def send() -> None:
        for correlation in range(1, 1 << 30):
            await window.acquire()
            values = [tag + b"|%d|%d" % (correlation, i) for i in range(rng.randint(1, 8))]
            batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)],
                                base_timestamp=int(time.time() * 1000))
            pending[correlation] = values
            ledger.sent.update(values)
            writer.write(kafka_frame(0, PRODUCE_V, correlation, {
                "transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
                    {"name": KAFKA_TOPIC, "partition_data": [
                        {"index": correlation % QUEUES, "records": batch}]}]}))
            await writer.drain()

    async def receive() -> None:
        while True:
            data = await read_frame(reader)
            correlation, pos = codec.decode_response_header(0, PRODUCE_V, data)
            body = codec.decode_response(0, PRODUCE_V, memoryview(data)[pos:])
            values = pending.pop(correlation)
            if body["responses"][0]["partition_responses"][0]["error_code"] == 0:
                ledger.acked.update(values)
            window.release()

    await _until_either_ends(send(), receive())
    writer.close()


async def kafka_read_all(port: int, ledger: Ledger) -> Counter:
    """Every record value of every partition from offset 0, CRC-checked, offsets dense."""
    seen: Counter = Counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for partition in range(QUEUES):
            offset = 0
            for correlation in range(1, 1 << 30):
                writer.write(kafka_frame(1, FETCH_V, correlation, {
                    "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 4 << 20, "isolation_level": 0,
                    "topics": [{"topic": KAFKA_TOPIC, "partitions": [
                        {"partition": partition, "fetch_offset": offset,
                         "partition_max_bytes": 4 << 20}]}]}))
                data = await asyncio.wait_for(read_frame(reader), 30)
                _, pos = codec.decode_response_header(1, FETCH_V, data)
                part = codec.decode_response(1, FETCH_V, memoryview(data)[pos:])["responses"][0]["partitions"][0]
                if part["error_code"]:
                    raise RuntimeError(f"fetch {partition}@{offset}: error {part['error_code']}")
                records = bytes(part["records"] or b"")
                if not records or offset >= part["high_watermark"]:
                    break
                for start, size in split_batches(records):
                    if not verify_crc(records, start):
                        ledger.corrupt += 1
                        continue
                    for record in iter_records(records[start:start + size]):
                        record_offset = _I64.unpack_from(records, start)[0] + record.offset_delta
                        if record_offset < offset:
                            continue  # a batch starting before the fetch offset
                        if record_offset != offset:
                            ledger.gaps += 1
                        offset = record_offset + 1
                        seen[record.value] += 1
    finally:
        writer.close()
    return seen


_I64 = struct.Struct(">q")


# ------------------------------------------------------------------ remoting
def send_command(body: bytes, queue_id: int) -> Any:
    header = SendMessageRequestHeader("soak", REMOTING_TOPIC, "TBW102", QUEUES, queue_id, 0,
                                      int(time.time() * 1000), 0, "")
    return request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body)


async def remoting_producer(port: int, tag: bytes, ledger: Ledger) -> None:
    """Sync sends, WINDOW in flight, until the connection dies."""
    client = await RemotingClient.connect(f"127.0.0.1:{port}")
    counter = iter(range(1 << 30))

    async def worker() -> None:
        for seq in counter:
            body = tag + b"|%d" % seq
            ledger.sent.add(body)
            response = await client.invoke(send_command(body, seq % QUEUES), timeout_s=30)
            if response.code == ResponseCode.SUCCESS:
                ledger.acked.add(body)

    try:  # a dead connection fails every worker's next or pending invoke: all end
        results = await asyncio.gather(*(worker() for _ in range(WINDOW)), return_exceptions=True)
    finally:
        await client.close()
    for result in results:  # how it ended (a connection error, normally)
        if isinstance(result, BaseException):
            raise result


async def remoting_read_all(port: int, ledger: Ledger) -> Counter:
    seen: Counter = Counter()
    async with await RemotingClient.connect(f"127.0.0.1:{port}") as client:
        for queue_id in range(QUEUES):
            offset = 0
            for _ in range(1 << 30):
                response = await client.invoke(request(RequestCode.PULL_MESSAGE, {
                    "consumerGroup": "soak_check", "topic": REMOTING_TOPIC,
                    "queueId": str(queue_id), "queueOffset": str(offset), "maxMsgNums": "256",
                    "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
                    "subscription": "*", "subVersion": "0"}), timeout_s=30)
                if response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
                    break
                if response.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"pull {queue_id}@{offset}: {response.code} {response.remark}")
                messages = decode_message_ext_records(response.body)
                if not messages:
                    break
                for message in messages:
                    if message.queue_offset != offset:
                        ledger.gaps += 1
                    offset = message.queue_offset + 1
                    seen[bytes(message.body)] += 1
    return seen


# ------------------------------------------------------------------ cycles
async def _until_either_ends(*coros: Any) -> None:
    """Run the coroutines until one ends (a dead connection ends them all); raises what
    ended it."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if task.exception() is not None:
            raise task.exception()


async def produce_then_kill(broker: Broker, cycle: int, ledgers: dict[str, Ledger],
                            run_s: float, rng: random.Random) -> None:
    producers = [asyncio.ensure_future(kafka_producer(broker.kafka_port, b"k|%d|%d" % (cycle, c),
                                                      ledgers["kafka"], random.Random(rng.random())))
                 for c in range(CONNECTIONS)]
    producers += [asyncio.ensure_future(remoting_producer(broker.remoting_port, b"r|%d|%d" % (cycle, c),
                                                          ledgers["remoting"]))
                  for c in range(CONNECTIONS)]
    await asyncio.sleep(run_s)
    for task in producers:
        if task.done():
            raise RuntimeError(f"a producer stopped before the kill: {task.exception()!r}")
    broker.kill()  # the moment: whatever responses were read by now are acknowledged
    done, alive = await asyncio.wait(producers, timeout=30)
    for task in alive:
        task.cancel()
    for task in done:
        exc = task.exception()
        if exc is not None and not isinstance(exc, (OSError, asyncio.IncompleteReadError,
                                                    RemotingClientError, asyncio.TimeoutError)):
            raise exc


def sabotage(store: str) -> None:
    """Zero the last 64 KiB written to the CommitLog, as a disk that lost acknowledged writes
    would: a check of the checker (--sabotage), which must then report losses. (The last
    4 KiB could hold only writes whose answers a loaded client had not read yet.)"""
    directory = os.path.join(store, "commitlog")
    for name in sorted((n for n in os.listdir(directory) if n.isdigit()), reverse=True):
        with open(os.path.join(directory, name), "r+b") as f:  # the newest with data: the
            data = f.read()                                  # next may be made ahead, empty
            end = len(data.rstrip(b"\0"))
            if end:
                f.seek(max(0, end - SABOTAGE_BYTES))
                f.write(bytes(end - max(0, end - SABOTAGE_BYTES)))
                return


def check(ledger: Ledger, seen: Counter) -> None:
    read = set(seen)
    ledger.read = sum(seen.values())
    ledger.lost |= ledger.acked - read
    ledger.duplicates = max(ledger.duplicates, sum(n - 1 for n in seen.values() if n > 1))
    ledger.corrupt += len(read - ledger.sent)
    ledger.unacked_found = len((read & ledger.sent) - ledger.acked)
    ledger.cycles += 1


def _quiet_lost_connection(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Drops one known harmless report: when a send's write fails because the broker died,
    RemotingClient.invoke leaves that request's future, already failed by the reader with
    the same error, unread ("Future exception was never retrieved")."""
    if isinstance(context.get("exception"), RemotingClientError) and \
            "never retrieved" in context.get("message", ""):
        return
    loop.default_exception_handler(context)


async def soak(args: argparse.Namespace) -> dict[str, Ledger]:
    asyncio.get_running_loop().set_exception_handler(_quiet_lost_connection)
    rng = random.Random(args.seed)
    root = tempfile.mkdtemp(prefix="crash-soak-", dir=args.dir)
    store = os.path.join(root, "store")
    broker = Broker(store, os.path.join(root, "broker.log"), args.set)
    ledgers = {"kafka": Ledger(), "remoting": Ledger()}
    try:
        broker.start()
        await create_topics(broker.kafka_port)
        for cycle in range(args.cycles):
            run_s = rng.uniform(args.min_run, args.max_run)
            await produce_then_kill(broker, cycle, ledgers, run_s, rng)
            if args.sabotage:
                sabotage(store)
            started = time.monotonic()
            broker.start()
            restart_s = time.monotonic() - started
            kafka_seen = await asyncio.wait_for(kafka_read_all(broker.kafka_port, ledgers["kafka"]),
                                                READ_TIMEOUT_S)
            remoting_seen = await asyncio.wait_for(
                remoting_read_all(broker.remoting_port, ledgers["remoting"]), READ_TIMEOUT_S)
            check(ledgers["kafka"], kafka_seen)
            check(ledgers["remoting"], remoting_seen)
            note(f"cycle {cycle + 1}/{args.cycles}: killed after {run_s:.2f} s, restarted in "
                 f"{restart_s:.2f} s; " + "; ".join(
                     f"{name} acked {len(l.acked)} read {l.read} lost {len(l.lost)}"
                     for name, l in ledgers.items()))
        broker.stop()
    finally:
        broker.stop()
        if args.keep or any(l.lost or l.corrupt for l in ledgers.values()):
            note(f"store and broker log kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return ledgers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3, help="kill/restart cycles (default 3)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (kill moments, batch sizes)")
    parser.add_argument("--min-run", type=float, default=0.3, help="least seconds of producing before a kill")
    parser.add_argument("--max-run", type=float, default=2.0, help="most seconds of producing before a kill")
    parser.add_argument("--dir", default=None, help="where the temporary store goes")
    parser.add_argument("--keep", action="store_true", help="keep the store and broker log")
    parser.add_argument("--sabotage", action="store_true",
                        help="zero the CommitLog's last 64 KiB after each kill: checks that the "
                             "soak reports losses (it must exit 1)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another broker setting (repeatable)")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    note(f"seed {args.seed}")
    try:
        ledgers = asyncio.run(soak(args))
    except RuntimeError as exc:
        note(str(exc))
        return 2
    for name, ledger in ledgers.items():
        totals = {"acked": len(ledger.acked), "read": ledger.read, "corrupt": ledger.corrupt,
                  "offset_gaps": ledger.gaps, "unacked_found": ledger.unacked_found,
                  "seed": args.seed}
        emit(f"acked_lost_{name}", len(ledger.lost), **totals)
        emit(f"duplicates_{name}", ledger.duplicates, **totals)
        emit(f"cycles_{name}", ledger.cycles, **totals)
    return 1 if any(l.lost or l.corrupt for l in ledgers.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
