"""AMQP 0-9-1 front-end end to end, with RabbitMQ beside it in the same run and client.

Run: python bench/amqp_bench.py [--messages N] [--skip-rabbitmq] [--only CASES]
Starts Rocketport as a subprocess (`python -m rocketport broker`, uvloop, a temporary store)
and, unless --skip-rabbitmq, a private RabbitMQ node (bench/peers/rabbitmq.py), and prints
one JSON object per measurement: {"bench": "amqp", "case": ..., "value": ..., "unit": ...,
"floor": ..., "peer": "rabbitmq", "peer_value": ...}, with the broker's CPU microseconds per
message beside throughput rows.

Cases (persistent messages into a durable queue through the default exchange):
- publish_{100B,1KiB}_pika: pika (SelectConnection) publishes with confirms, one wait per
  1,000 (the next 1,000 go out when the previous ones are confirmed). Rocketport on
  SYNC_FLUSH, as RabbitMQ confirms after its fsync. Floor: 2x RabbitMQ's.
- drain_{100B,1KiB}_pika: pika (BlockingConnection) consumes what was published, prefetch
  1,000, ack multiple every 100. Floor: 2x RabbitMQ's.
- publish_100B_raw / drain_100B_raw: a pipelined client of this benchmark's own
  (pre-encoded frames, 10,000 unconfirmed publishes in flight; the drain counts deliveries
  from frame headers) on ASYNC_FLUSH: the broker's ceiling, not a library's. Floors
  150,000 and 200,000 msg/s.
- latency_{1000,10000}_per_s: pika publishes 100 B messages stamped with the send time at
  that rate for 5 s; a consumer (no_ack, its own connection) records receive - send; p50
  and p99 in ms. Floor for p99 at 1,000 msg/s: RabbitMQ's.
Every broker runs the cases back to back; Rocketport restarts on ASYNC_FLUSH for the raw rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pika
from pamqp import commands, frame
from pamqp.header import ContentHeader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import rabbitmq  # noqa: E402

QUEUE = "bench-q"
CONFIRM_BATCH = 1000
PREFETCH = 1000
ACK_EVERY = 100
RAW_WINDOW = 10_000
LATENCY_SECONDS = 5.0
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
_FRAME_HEAD = struct.Struct(">BHI")
_U64 = struct.Struct(">Q")
_DELIVER = struct.pack(">I", (60 << 16) | 60)
_ACK = struct.pack(">I", (60 << 16) | 80)


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "amqp", "case": case, "value": round(value, 2), "unit": unit,
                      "floor": None if floor is None else round(floor, 2), **extra}), flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the broker exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the broker did not start")


@dataclass
class Target:
    name: str
    port: int
    pid: int
    stop: Callable[[], None]


def start_rocketport(workdir: str, flush: str) -> Target:
    port = free_port()
    store = os.path.join(workdir, f"store-{flush}")
    log = open(os.path.join(workdir, f"rocketport-{flush}.log"), "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={store}",
         "--set", f"flushDiskType={flush}", "--set", f"amqp.port={port}",
         "--set", "kafka.enabled=false", "--set", "stomp.enabled=false",
         "--set", f"listenPort={free_port()}", "--set", f"namesrv.port={free_port()}",
         "--set", "mappedFileSizeCommitLog=268435456"],
        stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    wait_for_port(port, proc)

    def stop() -> None:
        proc.terminate()
        proc.wait(60)
    return Target("rocketport", port, proc.pid, stop)


def start_rabbit(workdir: str) -> Target:
    node = rabbitmq.start(free_port(), free_port(), os.path.join(workdir, "rabbitmq"))
    return Target("rabbitmq", node.amqp_port, node.pid, node.stop)


def _params(port: int) -> pika.ConnectionParameters:
    return pika.ConnectionParameters("127.0.0.1", port, heartbeat=0)


def reset_queue(port: int) -> None:
    with pika.BlockingConnection(_params(port)) as conn:
        ch = conn.channel()
        ch.queue_declare(QUEUE, durable=True)
        ch.queue_purge(QUEUE)


# ---------------------------------------------------------------------- pika clients
def pika_publish(port: int, count: int, size: int) -> float:
    """Seconds to publish ``count`` persistent messages, one confirm wait per 1,000."""
    body = b"x" * size
    props = pika.BasicProperties(delivery_mode=2)
    state = {"sent": 0, "confirmed": 0, "start": 0.0, "end": 0.0}

    def send_batch(ch) -> None:
        n = min(CONFIRM_BATCH, count - state["sent"])
        for _ in range(n):
            ch.basic_publish("", QUEUE, body, props)
        state["sent"] += n

    def on_confirm(frame_) -> None:
        method = frame_.method
        if method.multiple:
            state["confirmed"] = max(state["confirmed"], method.delivery_tag)
        else:
            state["confirmed"] = max(state["confirmed"], method.delivery_tag)
        if state["confirmed"] >= count:
            state["end"] = time.perf_counter()
            conn.close()
        elif state["confirmed"] >= state["sent"]:
            send_batch(state["ch"])

    def on_channel(ch) -> None:
        state["ch"] = ch
        ch.confirm_delivery(on_confirm, callback=lambda _: start(ch))

    def start(ch) -> None:
        state["start"] = time.perf_counter()
        send_batch(ch)

    conn = pika.SelectConnection(_params(port), on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
                                 on_close_callback=lambda c, e: c.ioloop.stop())
    conn.ioloop.start()
    if state["confirmed"] < count:
        raise RuntimeError(f"only {state['confirmed']} of {count} publishes confirmed")
    return state["end"] - state["start"]


def pika_drain(port: int, count: int) -> float:
    """Seconds to consume ``count`` messages, prefetch 1,000, ack multiple every 100."""
    with pika.BlockingConnection(_params(port)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=PREFETCH)
        state = {"n": 0}

        def on_message(ch_, method, props, body) -> None:
            state["n"] += 1
            if state["n"] % ACK_EVERY == 0 or state["n"] == count:
                ch_.basic_ack(method.delivery_tag, multiple=True)
        start = time.perf_counter()
        ch.basic_consume(QUEUE, on_message)
        deadline = time.monotonic() + 600
        while state["n"] < count and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        elapsed = time.perf_counter() - start
    if state["n"] < count:
        raise RuntimeError(f"only {state['n']} of {count} delivered")
    return elapsed


def pika_latency(port: int, rate: int) -> tuple[float, float]:
    """p50 and p99 (ms) of publish-to-delivery at ``rate`` msg/s for LATENCY_SECONDS."""
    total = int(rate * LATENCY_SECONDS)
    latencies: list[float] = []
    ready = threading.Event()

    def consume() -> None:
        with pika.BlockingConnection(_params(port)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=PREFETCH)

            def on_message(ch_, method, props, body) -> None:
                latencies.append(time.perf_counter() - struct.unpack_from(">d", body)[0])
                if len(latencies) % ACK_EVERY == 0:
                    ch_.basic_ack(method.delivery_tag, multiple=True)
            ch.basic_consume(QUEUE, on_message)
            ready.set()
            deadline = time.monotonic() + LATENCY_SECONDS + 30
            while len(latencies) < total and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.1)
    consumer = threading.Thread(target=consume)
    consumer.start()
    ready.wait(30)
    time.sleep(0.2)
    with pika.BlockingConnection(_params(port)) as conn:
        ch = conn.channel()
        props = pika.BasicProperties(delivery_mode=2)
        start = time.perf_counter()
        pad = b"x" * 92
        for i in range(total):
            due = start + i / rate
            while (now := time.perf_counter()) < due:
                if due - now > 0.002:
                    time.sleep(due - now - 0.001)
            ch.basic_publish("", QUEUE, struct.pack(">d", time.perf_counter()) + pad, props)
    consumer.join(LATENCY_SECONDS + 60)
    if len(latencies) < total:
        raise RuntimeError(f"only {len(latencies)} of {total} delivered")
    ms = sorted(x * 1000 for x in latencies)
    return statistics.median(ms), ms[int(len(ms) * 0.99) - 1]


# ---------------------------------------------------------------------- raw pipelined client
class RawClient:
    """Pre-encoded frames over asyncio streams; counts frames from their headers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buf = bytearray()

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = cls(reader, writer)
        writer.write(PROTOCOL_HEADER)
        await client.expect(commands.Connection.Start)
        client.send(0, commands.Connection.StartOk(client_properties={"product": "bench"}, mechanism="PLAIN",
                                                   response="\0guest\0guest"))
        tune = await client.expect(commands.Connection.Tune)
        client.send(0, commands.Connection.TuneOk(tune.channel_max, tune.frame_max, 0))
        client.send(0, commands.Connection.Open("/"))
        await client.expect(commands.Connection.OpenOk)
        client.send(1, commands.Channel.Open())
        await client.expect(commands.Channel.OpenOk)
        return client

    def send(self, channel: int, value: Any) -> None:
        self.writer.write(frame.marshal(value, channel))

    async def expect(self, kind: type) -> Any:
        while True:
            while len(self.buf) >= 7:
                size = _FRAME_HEAD.unpack_from(self.buf)[2]
                if len(self.buf) < size + 8:
                    break
                used, _, value = frame.unmarshal(bytes(self.buf[:size + 8]))
                del self.buf[:used]
                if isinstance(value, kind):
                    return value
            data = await self.reader.read(1 << 16)
            if not data:
                raise ConnectionError("closed")
            self.buf += data

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def raw_publish(port: int, count: int, size: int) -> float:
    client = await RawClient.connect(port)
    client.send(1, commands.Confirm.Select())
    await client.expect(commands.Confirm.SelectOk)
    one = (frame.marshal(commands.Basic.Publish(exchange="", routing_key=QUEUE), 1)
           + frame.marshal(ContentHeader(body_size=size, properties=commands.Basic.Properties(delivery_mode=2)), 1)
           + frame.marshal(_body(size), 1))
    chunk = one * 100
    confirmed = sent = 0
    buf = client.buf
    start = time.perf_counter()
    while confirmed < count:
        while sent < count and sent - confirmed < RAW_WINDOW:
            n = min(100, count - sent)
            client.writer.write(chunk if n == 100 else one * n)
            sent += n
        data = await client.reader.read(1 << 16)
        if not data:
            raise ConnectionError("closed")
        buf += data
        pos = 0
        while len(buf) - pos >= 7:
            kind, _, length = _FRAME_HEAD.unpack_from(buf, pos)
            if len(buf) - pos < length + 8:
                break
            if kind == 1 and buf[pos + 7:pos + 11] == _ACK:
                confirmed = max(confirmed, _U64.unpack_from(buf, pos + 11)[0])
            pos += length + 8
        del buf[:pos]
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


def _body(size: int):
    from pamqp.body import ContentBody
    return ContentBody(b"x" * size)


async def raw_drain(port: int, count: int) -> float:
    client = await RawClient.connect(port)
    client.send(1, commands.Basic.Qos(prefetch_count=PREFETCH))
    await client.expect(commands.Basic.QosOk)
    client.send(1, commands.Basic.Consume(queue=QUEUE, consumer_tag="raw"))
    start = time.perf_counter()
    await client.expect(commands.Basic.ConsumeOk)
    buf = client.buf
    got = 0
    while got < count:
        data = await client.reader.read(1 << 18)
        if not data:
            raise ConnectionError("closed")
        buf += data
        pos = 0
        last = 0
        while len(buf) - pos >= 7:
            kind, _, length = _FRAME_HEAD.unpack_from(buf, pos)
            if len(buf) - pos < length + 8:
                break
            if kind == 1 and buf[pos + 7:pos + 11] == _DELIVER:
                got += 1
                if got % ACK_EVERY == 0 or got == count:
                    tag_at = pos + 12 + buf[pos + 11]
                    last = _U64.unpack_from(buf, tag_at)[0]
            pos += length + 8
        del buf[:pos]
        if last:
            client.writer.write(frame.marshal(commands.Basic.Ack(last, multiple=True), 1))
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


# ---------------------------------------------------------------------- cases
def throughput(target: Target, case: str, fn: Callable[[], float], count: int) -> tuple[float, float]:
    """msg/s and broker CPU µs per message."""
    cpu0 = cpu_seconds(target.pid)
    elapsed = fn()
    cpu = cpu_seconds(target.pid) - cpu0
    return count / elapsed, cpu * 1e6 / count


def run_pika_cases(target: Target, count: int, results: dict) -> None:
    for size, label in ((100, "100B"), (1024, "1KiB")):
        reset_queue(target.port)
        results[(target.name, f"publish_{label}_pika")] = throughput(
            target, "publish", lambda: pika_publish(target.port, count, size), count)
        results[(target.name, f"drain_{label}_pika")] = throughput(
            target, "drain", lambda: pika_drain(target.port, count), count)
    for rate in (1000, 10000):
        reset_queue(target.port)
        results[(target.name, f"latency_{rate}_per_s")] = pika_latency(target.port, rate)


def run_raw_cases(target: Target, count: int, results: dict) -> None:
    reset_queue(target.port)
    results[(target.name, "publish_100B_raw")] = throughput(
        target, "publish", lambda: asyncio.run(raw_publish(target.port, count, 100)), count)
    results[(target.name, "drain_100B_raw")] = throughput(
        target, "drain", lambda: asyncio.run(raw_drain(target.port, count)), count)


def report(results: dict) -> None:
    cases = sorted({case for _, case in results}, key=lambda c: (not c.startswith("publish"), c))
    for case in cases:
        mine = results.get(("rocketport", case))
        peer = results.get(("rabbitmq", case))
        if mine is None:
            continue
        extra: dict[str, Any] = {}
        if case.startswith("latency"):
            p50, p99 = mine
            if peer is not None:
                extra = {"peer": "rabbitmq", "peer_value": round(peer[1], 2), "peer_p50_ms": round(peer[0], 2)}
            floor = peer[1] if peer is not None and case == "latency_1000_per_s" else None
            emit(f"{case}_p99", p99, "ms", floor, p50_ms=round(p50, 2), **extra)
            continue
        rate, cpu = mine
        if peer is not None:
            extra = {"peer": "rabbitmq", "peer_value": round(peer[0], 1), "ratio": round(rate / peer[0], 2),
                     "peer_cpu_us_per_msg": round(peer[1], 1)}
        if case.endswith("_raw"):
            floor = 150_000 if case.startswith("publish") else 200_000
        else:
            floor = 2 * peer[0] if peer is not None and "100B" in case else None
        emit(case, rate, "msg/s", floor, cpu_us_per_msg=round(cpu, 1), **extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--raw-messages", type=int, default=200_000)
    parser.add_argument("--skip-rabbitmq", action="store_true")
    parser.add_argument("--only", default="pika,raw", help="pika, raw or both (comma-separated)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    workdir = tempfile.mkdtemp(prefix="amqp-bench-")
    results: dict = {}
    try:
        if "pika" in only:
            target = start_rocketport(workdir, "SYNC_FLUSH")
            try:
                run_pika_cases(target, args.messages, results)
            finally:
                target.stop()
        if "raw" in only:
            target = start_rocketport(workdir, "ASYNC_FLUSH")
            try:
                run_raw_cases(target, args.raw_messages, results)
            finally:
                target.stop()
        if not args.skip_rabbitmq:
            peer = start_rabbit(workdir)
            try:
                if "pika" in only:
                    run_pika_cases(peer, args.messages, results)
                if "raw" in only:
                    run_raw_cases(peer, args.raw_messages, results)
            finally:
                peer.stop()
        report(results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
