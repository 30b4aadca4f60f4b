"""STOMP front-end end to end, with RabbitMQ and ActiveMQ beside it in the same run.

Run: python bench/stomp_bench.py [--messages N] [--pipelined-messages N]
     [--targets sync,async,rabbitmq,activemq,ceiling] [--only stomppy,pipelined,latency]
     [--latency-passes N]
Starts Rocketport as a subprocess (`python -m rocketport broker`, uvloop, a temporary store)
on SYNC_FLUSH and on ASYNC_FLUSH, then a private RabbitMQ node with
rabbitmq_stomp (bench/peers/rabbitmq.py) and a private ActiveMQ broker with KahaDB syncing
every write (bench/peers/activemq.py), runs the same cases against each, and prints one JSON
object per measurement: {"bench": "stomp", "case": ..., "flush": ..., "value": ..., "unit":
..., "floor": ..., "peer": the better peer, "peer_value": ..., "rabbitmq": ..., "activemq":
...}, with the broker's and the client's (this process's) CPU microseconds per message
beside throughput rows.

Cases (persistent messages, `persistent:true`, into a `/queue/...` destination):
- produce_{100B,1KiB}_stomppy: stomp.py (1.2) sends with a receipt on every 1,000th message
  and the last, waiting for a batch's receipt once the next batch is sent. Floor on
  SYNC_FLUSH: 2x the better peer's.
- drain_{100B,1KiB}_stomppy: stomp.py drains what was produced, ack mode client (cumulative),
  prefetch 1,000, an ACK every 100. Floor on SYNC_FLUSH: 2x the better peer's.
- drain_{100B,1KiB}_stomppy_ceiling (target ``ceiling``): the same stomp.py drain against
  bench/stomp_frames_server.py, which only writes pre-rendered frames: what stomp.py
  itself can take on this machine, whatever the broker.
- produce/drain_{100B,1KiB}_pipelined: a pipelined client of this benchmark's own (asyncio
  streams, pre-encoded frames written 1,000 at a time, 10,000 unreceipted messages in
  flight; the drain counts frames by their NUL and acks cumulatively every 100). Floors on
  ASYNC_FLUSH for 100 B: 100,000 and 150,000 msg/s. On SYNC_FLUSH, 2x the better peer
  with the same client: the broker's figure where stomp.py itself cannot reach 2x a
  peer (its `client_cpu_us_per_msg` times its rate is one core: the client is saturated).
- latency_{1000,10000}_per_s: stomp.py sends 100 B messages stamped with the send time at
  that rate for 5 s to a stomp.py subscriber (ack auto, its own connection); p50 and p99 of
  receive - send in ms (the first 10% left out). After the throughput cases, for
  --latency-passes passes, the targets take turns (who goes first alternates), each alone
  on a broker started fresh for its turn; a row gives the median pass by p99 (`p50_ms` its p50)
  and the worst p99, the peers' likewise. One pass is too noisy on a 2-core machine: the
  same broker's p99 moves 2x between passes. Floor for p99 at 1,000 msg/s on SYNC_FLUSH:
  the better peer's. latency_1000_per_s_raw: the same at 1,000 msg/s with raw clients of
  this benchmark's own, producer and consumer each in a process of its own (the broker's
  own tail, without stomp.py's two threads sharing one interpreter). Under both flush types Rocketport makes a message visible once
  written (SYNC_FLUSH holds the receipt until the fsync), as the peers deliver before
  their own sync.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import stomp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import activemq, rabbitmq  # noqa: E402
from procs import consumer_latencies, cpu_seconds, free_port, wait_for_port  # noqa: E402

RECEIPT_EVERY = 1000
PREFETCH = 1000
ACK_EVERY = 100
PIPELINE_WINDOW = 10_000
LATENCY_SECONDS = 5.0
TIMEOUT_S = 300.0
SIZES = ((100, "100B"), (1024, "1KiB"))
PREFETCH_HEADERS = {"prefetch-count": str(PREFETCH), "activemq.prefetchSize": str(PREFETCH)}
SEND_HEADERS = {"persistent": "true"}


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "stomp", "case": case, "value": round(value, 2), "unit": unit,
                      "floor": None if floor is None else round(floor, 2), **extra}), flush=True)


@dataclass
class Target:
    name: str  # "rocketport-SYNC_FLUSH", "rabbitmq", "activemq"
    port: int
    pid: int
    stop: Callable[[], None]
    group: bool = False  # count the CPU of the whole process group (the peers)


def start_rocketport(workdir: str, flush: str) -> Target:
    os.makedirs(workdir, exist_ok=True)
    port = free_port()
    store = os.path.join(workdir, f"store-{flush}")
    log = open(os.path.join(workdir, f"rocketport-{flush}.log"), "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={store}",
         "--set", f"flushDiskType={flush}", "--set", f"stomp.port={port}", "--set", "stomp.wsPort=0",
         "--set", "kafka.enabled=false", "--set", "amqp.enabled=false",
         "--set", f"listenPort={free_port()}", "--set", f"namesrv.port={free_port()}",
         "--set", "mappedFileSizeCommitLog=268435456", "--set", "http.port=0"],
        stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    wait_for_port(port, proc)

    def stop() -> None:
        proc.terminate()
        proc.wait(60)
    return Target(f"rocketport-{flush}", port, proc.pid, stop)


def start_rabbit(workdir: str) -> Target:
    port = free_port()
    node = rabbitmq.start(free_port(), port, os.path.join(workdir, "rabbitmq"))
    return Target("rabbitmq", port, node.pid, node.stop, group=True)


def start_activemq(workdir: str) -> Target:
    port = free_port()
    broker = activemq.start(port, os.path.join(workdir, "activemq"))
    return Target("activemq", port, broker.pid, broker.stop, group=True)


def destination(label: str) -> str:
    return f"/queue/bench-{label}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------- stomp.py
class _Listener(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.on_frame: Callable[[Any], None] | None = None
        self.error: str | None = None

    def on_receipt(self, frame) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_message(self, frame) -> None:
        if self.on_frame is not None:
            self.on_frame(frame)

    def on_error(self, frame) -> None:
        with self.cond:
            self.error = frame.headers.get("message", "ERROR")
            self.cond.notify_all()

    def wait_receipt(self, receipt: str) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: receipt in self.receipts or self.error, TIMEOUT_S):
                raise TimeoutError(f"no receipt {receipt}")
            if self.error:
                raise RuntimeError(self.error)


def _connect(port: int) -> tuple[stomp.Connection12, _Listener]:
    conn = stomp.Connection12([("127.0.0.1", port)], heartbeats=(0, 0), auto_decode=False, vhost="/")
    listener = _Listener()
    conn.set_listener("bench", listener)
    conn.connect("guest", "guest", wait=True)
    return conn, listener


def stomppy_produce(port: int, dest: str, count: int, size: int) -> float:
    conn, listener = _connect(port)
    body = b"x" * size
    pending: str | None = None
    started = time.perf_counter()
    for i in range(count):
        if (i + 1) % RECEIPT_EVERY == 0 or i == count - 1:
            receipt = str(i)
            conn.send(dest, body, headers=SEND_HEADERS, receipt=receipt)
            if pending is not None:
                listener.wait_receipt(pending)
            pending = receipt
        else:
            conn.send(dest, body, headers=SEND_HEADERS)
    listener.wait_receipt(pending)
    elapsed = time.perf_counter() - started
    conn.disconnect()
    return elapsed


def stomppy_drain(port: int, dest: str, count: int) -> float:
    conn, listener = _connect(port)
    done = threading.Event()
    seen = 0

    def on_frame(frame) -> None:
        nonlocal seen
        seen += 1
        if seen % ACK_EVERY == 0 or seen == count:
            conn.ack(frame.headers["ack"])
        if seen == count:
            done.set()

    listener.on_frame = on_frame
    started = time.perf_counter()
    conn.subscribe(dest, id="drain", ack="client", headers=PREFETCH_HEADERS)
    if not done.wait(TIMEOUT_S):
        raise TimeoutError(f"drained {seen} of {count}")
    elapsed = time.perf_counter() - started
    conn.disconnect()
    return elapsed


def stomppy_latency(port: int, rate: int) -> tuple[float, float]:
    dest = destination(f"latency-{rate}")
    consumer, clistener = _connect(port)
    latencies: list[int] = []
    total = int(rate * LATENCY_SECONDS)
    done = threading.Event()

    def on_frame(frame) -> None:
        latencies.append(time.time_ns() - int(frame.headers["ts"]))
        if len(latencies) >= total:
            done.set()

    clistener.on_frame = on_frame
    consumer.subscribe(dest, id="lat", ack="auto", receipt="sub")
    clistener.wait_receipt("sub")
    producer, plistener = _connect(port)
    body = b"x" * 100
    started = time.perf_counter()
    for i in range(total):
        due = started + i / rate
        delay = due - time.perf_counter()
        if delay > 0.0005:
            time.sleep(delay)
        producer.send(dest, body, headers={**SEND_HEADERS, "ts": str(time.time_ns())})
    done.wait(30)
    producer.disconnect()
    consumer.disconnect()
    kept = sorted(latencies[len(latencies) // 10:])
    if len(kept) < total // 2:
        raise RuntimeError(f"only {len(latencies)} of {total} messages arrived")
    return statistics.median(kept) / 1e6, kept[int(len(kept) * 0.99) - 1] / 1e6


def _raw_latency_consumer(port: int, dest: str, total: int, pipe) -> None:
    """A raw subscriber in a process of its own (procs.consumer_latencies): the stamp in
    each body against its arrival."""
    async def run() -> list[int]:
        reader, writer, _ = await _raw_connect(port)
        writer.write(f"SUBSCRIBE\ndestination:{dest}\nid:0\nack:auto\nreceipt:s\n\n\0".encode())
        await reader.readuntil(b"\0")
        pipe.send("ready")
        latencies: list[int] = []
        buf = b""
        while len(latencies) < total:
            chunk = await asyncio.wait_for(reader.read(65536), 30)
            now = time.perf_counter_ns()
            if not chunk:
                break
            buf += chunk
            *frames, buf = buf.split(b"\0")
            for frame in frames:
                body = frame[frame.rfind(b"\n\n") + 2:]
                latencies.append(now - int(body[:20]))
        return latencies
    try:
        pipe.send(asyncio.run(run()))
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        pipe.send(f"consumer failed: {exc!r}")


def raw_latency(port: int, rate: int) -> tuple[float, float]:
    """The latency case with raw clients, producer and consumer in separate processes:
    the broker's own tail, without stomp.py's threads sharing one interpreter."""
    dest = destination(f"rawlat-{rate}")
    total = int(rate * LATENCY_SECONDS)

    async def produce() -> None:
        _, writer, _ = await _raw_connect(port)
        head = f"SEND\ndestination:{dest}\npersistent:true\ncontent-length:100\n\n".encode()
        started = time.perf_counter()
        for i in range(total):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(head + b"%020d" % time.perf_counter_ns() + b"x" * 80 + b"\0")
        await writer.drain()
        await asyncio.sleep(0.5)
        writer.close()
    latencies = consumer_latencies(_raw_latency_consumer, (port, dest, total),
                                   lambda: asyncio.run(produce()), 60)
    kept = sorted(latencies[len(latencies) // 10:])
    if len(kept) < total // 2:
        raise RuntimeError(f"only {len(latencies)} of {total} messages arrived")
    return statistics.median(kept) / 1e6, kept[int(len(kept) * 0.99) - 1] / 1e6


# ---------------------------------------------------------------------------- pipelined
async def _raw_connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    writer.write(b"CONNECT\naccept-version:1.1,1.2\nhost:/\nlogin:guest\npasscode:guest\nheart-beat:0,0\n\n\0")
    head = await reader.readuntil(b"\0")
    if not head.startswith(b"CONNECTED"):
        raise RuntimeError(head.decode(errors="replace"))
    version = "1.2" if b"version:1.2" in head else "1.1"
    return reader, writer, version


async def pipelined_produce(port: int, dest: str, count: int, size: int) -> float:
    reader, writer, _ = await _raw_connect(port)
    head = f"SEND\ndestination:{dest}\npersistent:true\ncontent-length:{size}\n".encode()
    plain = head + b"\n" + b"x" * size + b"\0"
    receipts = asyncio.Queue()

    async def read_receipts() -> None:
        buf = b""
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                frame, buf = buf.split(b"\0", 1)
                frame = frame.lstrip(b"\r\n")
                if frame.startswith(b"ERROR"):
                    raise RuntimeError(frame.decode(errors="replace"))
                if frame.startswith(b"RECEIPT"):
                    receipts.put_nowait(None)

    reading = asyncio.ensure_future(read_receipts())
    started = time.perf_counter()
    outstanding = 0
    sent = 0
    while sent < count:
        batch = min(RECEIPT_EVERY, count - sent)
        frames = [plain] * (batch - 1)
        frames.append(head + f"receipt:{sent + batch}\n\n".encode() + b"x" * size + b"\0")
        writer.write(b"".join(frames))
        sent += batch
        outstanding += batch
        while outstanding > PIPELINE_WINDOW:
            await asyncio.wait_for(receipts.get(), TIMEOUT_S)
            outstanding -= RECEIPT_EVERY
        await writer.drain()
    while outstanding > 0:
        await asyncio.wait_for(receipts.get(), TIMEOUT_S)
        outstanding -= RECEIPT_EVERY
    elapsed = time.perf_counter() - started
    reading.cancel()
    writer.close()
    return elapsed


async def pipelined_drain(port: int, dest: str, count: int) -> float:
    reader, writer, version = await _raw_connect(port)
    started = time.perf_counter()
    writer.write(f"SUBSCRIBE\ndestination:{dest}\nid:0\nack:client\nprefetch-count:{PREFETCH}\n"
                 f"activemq.prefetchSize:{PREFETCH}\n\n\0".encode())
    id_header = b"\nack:" if version == "1.2" else b"\nmessage-id:"
    seen = unacked = 0
    buf = b""
    deadline = time.monotonic() + TIMEOUT_S
    while seen < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"drained {seen} of {count}")
        chunk = await reader.read(1 << 20)
        if not chunk:
            raise RuntimeError("the broker closed the connection")
        buf += chunk
        last = buf.rfind(b"\0")
        if last < 0:
            continue
        done = buf.count(b"\0", 0, last + 1)
        if buf.startswith(b"ERROR") or b"\0ERROR" in buf:
            raise RuntimeError(buf[:300].decode(errors="replace"))
        seen += done
        unacked += done
        if unacked >= ACK_EVERY or seen >= count:
            at = buf.rfind(id_header, 0, last)
            end = buf.find(b"\n", at + len(id_header))
            ack_id = buf[at + len(id_header):end]
            if version == "1.2":
                writer.write(b"ACK\nid:" + ack_id + b"\n\n\0")
            else:
                writer.write(b"ACK\nmessage-id:" + ack_id + b"\nsubscription:0\n\n\0")
            unacked = 0
        buf = buf[last + 1:]
    elapsed = time.perf_counter() - started
    writer.write(b"DISCONNECT\nreceipt:bye\n\n\0")
    await writer.drain()
    writer.close()
    return elapsed


# ---------------------------------------------------------------------------- runs
def throughput(target: Target, fn: Callable[[], float], count: int) -> tuple[float, float, float]:
    """msg/s, broker CPU µs per message and client (this process) CPU µs per message."""
    cpu0 = cpu_seconds(target.pid, target.group)
    client0 = time.process_time()
    elapsed = fn()
    client = time.process_time() - client0
    cpu = cpu_seconds(target.pid, target.group) - cpu0
    return count / elapsed, cpu * 1e6 / count, client * 1e6 / count


def run_ceiling(workdir: str, count: int, results: dict) -> None:
    """The stomp.py drain against a server that only writes pre-rendered frames."""
    for size, label in SIZES:
        port = free_port()
        proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "stomp_frames_server.py"),
                                 str(port), str(count), str(size)])
        try:
            wait_for_port(port, proc)
            target = Target("ceiling", port, proc.pid, lambda: None)
            results[("ceiling", f"drain_{label}_stomppy")] = throughput(
                target, lambda: stomppy_drain(port, "/queue/ceiling", count), count)
        finally:
            proc.terminate()
            proc.wait(60)


def run_cases(target: Target, only: set[str], count: int, pipelined_count: int, results: dict) -> None:
    for size, label in SIZES:
        if "stomppy" in only:
            dest = destination(label)
            results[(target.name, f"produce_{label}_stomppy")] = throughput(
                target, lambda: stomppy_produce(target.port, dest, count, size), count)
            results[(target.name, f"drain_{label}_stomppy")] = throughput(
                target, lambda: stomppy_drain(target.port, dest, count), count)
        if "pipelined" in only:
            dest = destination(f"p{label}")
            results[(target.name, f"produce_{label}_pipelined")] = throughput(
                target, lambda: asyncio.run(pipelined_produce(target.port, dest, pipelined_count, size)),
                pipelined_count)
            results[(target.name, f"drain_{label}_pipelined")] = throughput(
                target, lambda: asyncio.run(pipelined_drain(target.port, dest, pipelined_count)),
                pipelined_count)


def run_latency(start: dict[str, Callable[[str], Target]], names: list[str], passes: int,
                workdir: str, results: dict) -> None:
    """Latency passes, the targets taking turns (who goes first alternates); each target
    runs alone, on a fresh broker started for its turn: an idle broker beside the one
    measured still does background work (a peer's p99 moved 0.3 -> 60 ms with two idle
    Rocketports beside it)."""
    for n in range(passes):
        for name in names if n % 2 == 0 else names[::-1]:
            target = start[name](os.path.join(workdir, f"latency-{n}"))
            try:
                for rate in (1000, 10000):
                    results.setdefault((target.name, f"latency_{rate}_per_s"), []).append(
                        stomppy_latency(target.port, rate))
                results.setdefault((target.name, "latency_1000_per_s_raw"), []).append(
                    raw_latency(target.port, 1000))
            finally:
                target.stop()


def _median_pass(passes: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(p50, p99) of the median pass by p99, and the worst p99."""
    middle = sorted(passes, key=lambda r: r[1])[len(passes) // 2]
    return middle[0], middle[1], max(p99 for _, p99 in passes)


def report(results: dict) -> None:
    cases = sorted({case for _, case in results})
    for flush in ("SYNC_FLUSH", "ASYNC_FLUSH"):
        for case in cases:
            mine = results.get((f"rocketport-{flush}", case))
            if mine is None:
                continue
            peers = {name: results[(name, case)] for name in ("rabbitmq", "activemq") if (name, case) in results}
            extra: dict[str, Any] = {"flush": flush}
            if case.startswith("latency"):
                p50, p99, worst = _median_pass(mine)
                medians = {n: _median_pass(v) for n, v in peers.items()}
                better = min(medians, key=lambda n: medians[n][1]) if medians else None
                if better is not None:
                    extra.update(peer=better, peer_value=round(medians[better][1], 2),
                                 **{n: {"p50_ms": round(v[0], 2), "p99_ms": round(v[1], 2),
                                        "worst_p99_ms": round(v[2], 2)} for n, v in medians.items()})
                floor = (medians[better][1] if better is not None and flush == "SYNC_FLUSH"
                         and case in ("latency_1000_per_s", "latency_1000_per_s_raw") else None)
                emit(f"{case}_p99", p99, "ms", floor, p50_ms=round(p50, 2), worst_p99_ms=round(worst, 2),
                     passes=len(mine), **extra)
                continue
            rate, cpu, client_cpu = mine
            better = max(peers, key=lambda n: peers[n][0]) if peers else None
            if better is not None:
                extra.update(peer=better, peer_value=round(peers[better][0], 1),
                             ratio=round(rate / peers[better][0], 2),
                             **{n: round(v[0], 1) for n, v in peers.items()},
                             **{f"{n}_cpu_us_per_msg": round(v[1], 1) for n, v in peers.items()},
                             **{f"{n}_client_cpu_us_per_msg": round(v[2], 1) for n, v in peers.items()})
            floor = None
            if case.endswith(("_stomppy", "_pipelined")) and flush == "SYNC_FLUSH" and better is not None:
                floor = 2 * peers[better][0]
            elif case.endswith("100B_pipelined") and flush == "ASYNC_FLUSH":
                floor = 100_000 if case.startswith("produce") else 150_000
            emit(case, rate, "msg/s", floor, cpu_us_per_msg=round(cpu, 1),
                 client_cpu_us_per_msg=round(client_cpu, 1), **extra)
    for case in cases:
        ceiling = results.get(("ceiling", case))
        if ceiling is not None:
            emit(f"{case}_ceiling", ceiling[0], "msg/s", None,
                 client_cpu_us_per_msg=round(ceiling[2], 1), flush=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="per stomp.py case")
    parser.add_argument("--pipelined-messages", type=int, default=100_000, help="per pipelined case")
    parser.add_argument("--targets", default="sync,async,rabbitmq,activemq,ceiling",
                        help="brokers to run: sync, async (Rocketport's flush modes), rabbitmq, "
                             "activemq; ceiling: stomp.py drains against pre-rendered frames")
    parser.add_argument("--only", default="stomppy,pipelined,latency",
                        help="stomppy, pipelined, latency (comma-separated)")
    parser.add_argument("--latency-passes", type=int, default=3, help="per latency target")
    args = parser.parse_args()
    only = set(args.only.split(","))
    workdir = tempfile.mkdtemp(prefix="stomp-bench-")
    results: dict = {}
    starters: dict[str, Callable[[str], Target]] = {
        "sync": lambda wd: start_rocketport(wd, "SYNC_FLUSH"),
        "async": lambda wd: start_rocketport(wd, "ASYNC_FLUSH"),
        "rabbitmq": start_rabbit, "activemq": start_activemq}
    names = args.targets.split(",")
    try:
        for name in names:
            if name == "ceiling":
                if "stomppy" in only:
                    run_ceiling(workdir, args.messages, results)
                continue
            if not only & {"stomppy", "pipelined"}:
                continue
            target = starters[name](workdir)
            print(f"stomp_bench: {target.name} on port {target.port}", file=sys.stderr, flush=True)
            try:
                run_cases(target, only, args.messages, args.pipelined_messages, results)
            finally:
                target.stop()
                print(f"stomp_bench: {target.name} done", file=sys.stderr, flush=True)
        if "latency" in only:
            run_latency(starters, [n for n in names if n != "ceiling"], args.latency_passes,
                        workdir, results)
        report(results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
