"""AMQP 0-9-1 front-end end to end, with RabbitMQ beside it in the same run and client.

Run: python bench/amqp_bench.py [--messages N] [--raw-messages N] [--raw-sync-messages N]
     [--passes N] [--skip-rabbitmq] [--only CASES] [--latency-rates 1000,10000]
Starts Rocketport as a subprocess (`python -m rocketport broker`, uvloop, a temporary store)
and, unless --skip-rabbitmq, a private RabbitMQ node (bench/peers/rabbitmq.py), and prints
one JSON object per measurement: {"bench": "amqp", "case": ..., "value": ..., "unit": ...,
"floor": ..., "peer": "rabbitmq", "peer_value": ...}, with the broker's CPU microseconds per
message (`cpu_us_per_msg`, `peer_cpu_us_per_msg`) and the client's, i.e. this process's
time.process_time() (`client_cpu_us_per_msg`, `peer_client_cpu_us_per_msg`), beside
throughput rows.

Cases (persistent messages into a durable queue through the default exchange; --only picks
them by the name in brackets):
- publish_{100B,1KiB}_pika [pika]: pika (SelectConnection) publishes with confirms, one wait
  per 1,000 (the next 1,000 go out when the previous ones are confirmed). Rocketport on
  SYNC_FLUSH, as RabbitMQ confirms after its fsync. Floor: 2x RabbitMQ's.
- drain_{100B,1KiB}_pika [pika]: pika (BlockingConnection) consumes what was published,
  prefetch 1,000, ack multiple every 100. Floor: 2x RabbitMQ's. The row carries `ceiling`.
- publish_100B_pika_typed_headers [typed]: the pika publish with a Celery-like typed header
  table of 10 entries on every message (strings, integers, void, an array, a boolean, a
  decimal, a timestamp, bytes, a table; the task id each message's own), which Rocketport
  keeps whole for AMQP consumers beside each header's text. Floor: 2x RabbitMQ's.
- publish_100B_raw_typed_headers [typed]: the same typed header tables, each message's
  frames pre-encoded by this benchmark's raw client (one confirm wait per 1,000, SYNC_FLUSH
  as the pika row): the broker-against-broker ratio for typed headers with no library in
  the way (pika's own encoding costs more than either broker). Floor: 2x RabbitMQ's.
- drain_{100B,1KiB}_pika_ceiling [ceiling, with pika]: the same pika drain against
  bench/amqp_frames_server.py, a server that only writes pre-rendered deliveries (same
  window, same properties) and stores nothing: what pika itself can take on this machine,
  whatever the broker; one pass after the brokers' turns in each pass.
- publish_{100B,1KiB}_aio_pika / drain_{100B,1KiB}_aio_pika [aio_pika]: the same two cases
  with aio-pika (uvloop; publishes gathered 1,000 at a time, each confirmed; the drain reads
  the queue's iterator), the other client the issue names. Floor: 2x RabbitMQ's.
- publish_100B_raw / drain_100B_raw [raw]: a pipelined client of this benchmark's own
  (pre-encoded frames, confirms on, up to 10,000 publishes unconfirmed in flight; the drain
  counts deliveries from frame headers, prefetch 1,000, ack multiple every 100) on
  ASYNC_FLUSH: the broker's ceiling, not a library's. Floors 150,000 and 200,000 msg/s.
- publish_100B_raw_confirm / drain_100B_raw_sync [raw_sync]: the raw client against
  Rocketport on SYNC_FLUSH and RabbitMQ: publishes pre-encoded, one confirm wait per 1,000
  (as the pika publish), then the raw drain of them (--raw-sync-messages, default 100,000):
  the broker-against-broker ratio with no library in the way. Floor: 2x RabbitMQ's.
- latency_{1000,10000}_per_s_{async,sync} [latency]: pika publishes 100 B messages
  (BlockingConnection, no confirms), each stamped with time.perf_counter_ns()
  (CLOCK_MONOTONIC, one clock for all processes), paced at that rate for 5 s by sleeping
  until each is due (no busy-wait: the machine's other core is the broker's); a pika
  consumer (prefetch 1,000, ack every 100) in its own process records receive - send; p50
  and p99 in ms. Floor for p99 at 1,000 msg/s: RabbitMQ's.
- latency_1000_per_s_raw_{async,sync} [raw_latency]: the same at 1,000 msg/s with raw
  clients: pre-encoded publishes written by an asyncio publisher in this process (its
  timers have about 1 ms of grain, so a late wake-up sends the ones due back to back), a
  raw consumer (uvloop) in its own process taking a body's receive time when the read that
  completed it returned: the broker's own tail. Floor for p99: RabbitMQ's.
- dlx_expiry_100B_raw [dlx]: --dlx-messages (default 100,000) persistent 100 B messages
  published (raw client, confirms, pipelined) into a durable queue with x-message-ttl
  (--dlx-ttl-ms, default 100) and x-dead-letter-exchange and no consumer, while a raw
  consumer (prefetch 1,000, ack multiple every 100) drains the queue bound to that fanout
  exchange: msg/s from the first publish to the last dead-lettered delivery (the time is
  the count over it). Rocketport on ASYNC_FLUSH. Floor: RabbitMQ's (no slower).
Two Rocketport brokers (SYNC_FLUSH and ASYNC_FLUSH) and RabbitMQ run at once; every case runs
--passes times per broker, the brokers taking turns (who goes first alternates): throughput
rows give the best pass with every pass (`runs`, `peer_runs`), latency rows the median pass
by p99, the worst p99 and every pass's [p50, p99]. Latency runs on both Rocketport flush
modes against the one RabbitMQ: RabbitMQ hands a persistent message to consumers before its
fsync, as Rocketport does under ASYNC_FLUSH; under SYNC_FLUSH the store makes a message
visible after the fsync that covers it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import decimal
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
import pika
import uvloop
from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import rabbitmq  # noqa: E402
from procs import consumer_latencies, cpu_seconds, free_port, wait_for_port  # noqa: E402

QUEUE = "bench-q"
CONFIRM_BATCH = 1000
PREFETCH = 1000
ACK_EVERY = 100
RAW_WINDOW = 10_000
LATENCY_SECONDS = 5.0
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
_FRAME_HEAD = struct.Struct(">BHI")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_DELIVER = struct.pack(">I", (60 << 16) | 60)
_ACK = struct.pack(">I", (60 << 16) | 80)
_NACK = struct.pack(">I", (60 << 16) | 120)


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "amqp", "case": case, "value": round(value, 2), "unit": unit,
                      "floor": None if floor is None else round(floor, 2), **extra}), flush=True)


@dataclass
class Target:
    name: str
    port: int
    pid: int
    stop: Callable[[], None]
    group: bool = False  # count the CPU of its whole process group


def start_rocketport(workdir: str, flush: str) -> Target:
    port = free_port()
    store = os.path.join(workdir, f"store-{flush}")
    log = open(os.path.join(workdir, f"rocketport-{flush}.log"), "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={store}",
         "--set", f"flushDiskType={flush}", "--set", f"amqp.port={port}",
         "--set", "kafka.enabled=false", "--set", "stomp.enabled=false", "--set", "http.enabled=false",
         "--set", f"listenPort={free_port()}", "--set", f"namesrv.port={free_port()}",
         "--set", "mappedFileSizeCommitLog=268435456", "--set", "http.port=0"],
        stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    wait_for_port(port, proc)

    def stop() -> None:
        proc.terminate()
        proc.wait(60)
    return Target("rocketport", port, proc.pid, stop)


def start_rabbit(workdir: str) -> Target:
    node = rabbitmq.start(free_port(), free_port(), os.path.join(workdir, "rabbitmq"))
    return Target("rabbitmq", node.amqp_port, node.pid, node.stop, group=True)


def _params(port: int) -> pika.ConnectionParameters:
    return pika.ConnectionParameters("127.0.0.1", port, heartbeat=0)


def reset_queue(port: int) -> None:
    with pika.BlockingConnection(_params(port)) as conn:
        ch = conn.channel()
        ch.queue_declare(QUEUE, durable=True)
        ch.queue_purge(QUEUE)


# ---------------------------------------------------------------------- pika clients
def typed_headers(n: int) -> dict[str, Any]:
    """A Celery-like header table of 10 entries, typed (a string, integers, void, an array,
    a boolean, a decimal, a timestamp, bytes, a table), its task id each message's own."""
    return {"id": "task-%012d" % n, "task": "proj.tasks.add", "retries": 3, "eta": None,
            "timelimit": [None, None], "ignore_result": False, "price": decimal.Decimal("9.99"),
            "sent_at": datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc),
            "blob": b"\x00\x01\xfe", "origin": {"host": "worker-1", "pid": 4242}}


def pika_publish(port: int, count: int, size: int, headers: Callable[[int], dict] | None = None) -> float:
    """Seconds to publish ``count`` persistent messages, one confirm wait per 1,000; with
    ``headers``, each message carries the header table it makes of the message's number."""
    body = b"x" * size
    props = pika.BasicProperties(delivery_mode=2)
    state = {"sent": 0, "confirmed": 0, "start": 0.0, "end": 0.0}

    def send_batch(ch) -> None:
        n = min(CONFIRM_BATCH, count - state["sent"])
        if headers is None:
            for _ in range(n):
                ch.basic_publish("", QUEUE, body, props)
        else:
            for i in range(state["sent"], state["sent"] + n):
                ch.basic_publish("", QUEUE, body, pika.BasicProperties(delivery_mode=2, headers=headers(i)))
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


def _pace(rate: int, total: int, publish: Callable[[int], None]) -> None:
    """Call ``publish(i)`` for i in 0..total-1, the i-th due at start + i / rate, sleeping
    (not spinning) until each is due: the broker needs the core a busy-wait would take. A
    late sleep makes the next few go out back to back."""
    start = time.perf_counter()
    for i in range(total):
        wait = start + i / rate - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        publish(i)


def _pika_consumer(port: int, total: int, pipe) -> None:
    """The latency consumer's process: pika (BlockingConnection), prefetch 1,000, ack
    multiple every 100; sends "ready" once consuming, then the receive - send times (ms)."""
    latencies: list[float] = []
    try:
        with pika.BlockingConnection(_params(port)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=PREFETCH)

            def on_message(ch_, method, props, body) -> None:
                latencies.append((time.perf_counter_ns() - _I64.unpack_from(body)[0]) / 1e6)
                if len(latencies) % ACK_EVERY == 0 or len(latencies) == total:
                    ch_.basic_ack(method.delivery_tag, multiple=True)
                if len(latencies) >= total:
                    ch_.stop_consuming()
            ch.basic_consume(QUEUE, on_message)
            conn.call_later(LATENCY_SECONDS + 30, ch.stop_consuming)
            pipe.send("ready")
            ch.start_consuming()
        pipe.send(latencies)
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        pipe.send(f"consumer failed: {exc!r}")


def _latency_run(port: int, rate: int, consumer: Callable, publish_all: Callable[[int], None]) -> tuple[float, float]:
    """Start ``consumer(port, total, pipe)`` in its own process, publish with
    ``publish_all(total)`` once it consumes, and return p50 and p99 (ms) of its times."""
    total = int(rate * LATENCY_SECONDS)

    def publish() -> None:
        time.sleep(0.2)
        publish_all(total)
    latencies = consumer_latencies(consumer, (port, total), publish, LATENCY_SECONDS + 60)
    if len(latencies) < total:
        raise RuntimeError(f"only {len(latencies)} of {total} delivered")
    ms = sorted(latencies)
    return statistics.median(ms), ms[int(len(ms) * 0.99) - 1]


def pika_latency(port: int, rate: int) -> tuple[float, float]:
    """p50 and p99 (ms) of publish-to-delivery at ``rate`` msg/s for LATENCY_SECONDS: pika
    publishes (BlockingConnection, persistent, no confirms) from this process, each body
    stamped with time.perf_counter_ns() (CLOCK_MONOTONIC: one clock for every process);
    a pika consumer in its own process takes receive - send."""
    def publish_all(total: int) -> None:
        with pika.BlockingConnection(_params(port)) as conn:
            ch = conn.channel()
            props = pika.BasicProperties(delivery_mode=2)
            pad = b"x" * 92
            _pace(rate, total, lambda i: ch.basic_publish("", QUEUE, _I64.pack(time.perf_counter_ns()) + pad, props))
    return _latency_run(port, rate, _pika_consumer, publish_all)


# ---------------------------------------------------------------------- aio-pika clients
def _url(port: int) -> str:
    return f"amqp://guest:guest@127.0.0.1:{port}/?heartbeat=0"


async def aio_pika_publish(port: int, count: int, size: int) -> float:
    """Seconds to publish ``count`` persistent messages, one confirm wait per 1,000."""
    body = b"x" * size
    async with await aio_pika.connect(_url(port)) as conn:
        exchange = (await conn.channel(publisher_confirms=True)).default_exchange
        start = time.perf_counter()
        for sent in range(0, count, CONFIRM_BATCH):
            await asyncio.gather(*(
                exchange.publish(aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), QUEUE)
                for _ in range(min(CONFIRM_BATCH, count - sent))))
        return time.perf_counter() - start


async def aio_pika_drain(port: int, count: int) -> float:
    """Seconds to consume ``count`` messages, prefetch 1,000, ack multiple every 100."""
    async with await aio_pika.connect(_url(port)) as conn:
        channel = await conn.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        queue = await channel.declare_queue(QUEUE, durable=True)
        got = 0
        start = time.perf_counter()
        async with queue.iterator() as messages:
            async for message in messages:
                got += 1
                if got % ACK_EVERY == 0 or got == count:
                    await message.ack(multiple=True)
                if got == count:
                    break
        return time.perf_counter() - start


# ---------------------------------------------------------------------- raw pipelined client
class RawClient:
    """Pre-encoded frames over asyncio streams; counts frames from their headers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buf = bytearray()
        self.read_at = 0  # perf_counter_ns of the last read_frames
        self._whole = 0  # bytes of whole frames the last read_frames found

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

    async def read_frames(self, size: int = 1 << 16, timeout: float | None = None) -> list[tuple[int, int]]:
        """One read, then (frame type, offset in ``buf``) of every whole frame at the
        buffer's start, found from their headers (nothing decoded); ``read_at`` is when the
        read returned. The caller looks into ``buf``, then calls `release`."""
        data = await asyncio.wait_for(self.reader.read(size), timeout)
        self.read_at = time.perf_counter_ns()
        if not data:
            raise ConnectionError("closed")
        buf = self.buf
        buf += data
        found: list[tuple[int, int]] = []
        pos = 0
        while len(buf) - pos >= 7:
            kind, _, length = _FRAME_HEAD.unpack_from(buf, pos)
            if len(buf) - pos < length + 8:
                break
            found.append((kind, pos))
            pos += length + 8
        self._whole = pos
        return found

    def release(self) -> None:
        """Drop the frames the last `read_frames` returned."""
        del self.buf[:self._whole]
        self._whole = 0

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


async def _read_confirms(client: RawClient, confirmed: int) -> int:
    """One read: the highest delivery tag confirmed so far; a basic.nack raises."""
    buf = client.buf
    for kind, pos in await client.read_frames():
        if kind == 1 and buf[pos + 7:pos + 11] == _ACK:
            confirmed = max(confirmed, _U64.unpack_from(buf, pos + 11)[0])
        elif kind == 1 and buf[pos + 7:pos + 11] == _NACK:
            raise RuntimeError("the broker nacked a publish")
    client.release()
    return confirmed


async def raw_publish(port: int, count: int, size: int) -> float:
    client = await _confirming(port)
    start = time.perf_counter()
    await _publish_windowed(client, _publish_frames(size), count)
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


async def _confirming(port: int) -> RawClient:
    """A raw client with confirms on channel 1."""
    client = await RawClient.connect(port)
    client.send(1, commands.Confirm.Select())
    await client.expect(commands.Confirm.SelectOk)
    return client


async def _publish_windowed(client: RawClient, one: bytes, count: int) -> None:
    """``count`` copies of the pre-encoded publish ``one``, up to RAW_WINDOW unconfirmed."""
    chunk = one * 100
    confirmed = sent = 0
    while confirmed < count:
        while sent < count and sent - confirmed < RAW_WINDOW:
            n = min(100, count - sent)
            client.writer.write(chunk if n == 100 else one * n)
            sent += n
        confirmed = await _read_confirms(client, confirmed)


async def _publish_in_confirmed_batches(client: RawClient, frames: Callable[[int, int], bytes],
                                        count: int) -> None:
    """``count`` publishes, CONFIRM_BATCH at a time (``frames(first, n)`` encodes them),
    each batch written once the previous one is confirmed."""
    confirmed = sent = 0
    while confirmed < count:
        if confirmed >= sent:
            n = min(CONFIRM_BATCH, count - sent)
            client.writer.write(frames(sent, n))
            sent += n
        confirmed = await _read_confirms(client, confirmed)


def _for_pamqp(table: dict[str, Any]) -> dict[str, Any]:
    """pamqp writes a byte array ('x') from a bytearray (bytes are pika's spelling)."""
    return {k: bytearray(v) if isinstance(v, bytes) else v for k, v in table.items()}


async def raw_publish_typed(port: int, count: int, size: int) -> float:
    """Seconds to publish ``count`` persistent messages each with its own typed header
    table (`typed_headers`), frames encoded before the clock starts, one confirm wait per
    1,000 (as `raw_publish_confirm`)."""
    messages = [_publish_frames(size, headers=_for_pamqp(typed_headers(i))) for i in range(count)]
    client = await _confirming(port)
    start = time.perf_counter()
    await _publish_in_confirmed_batches(client, lambda first, n: b"".join(messages[first:first + n]), count)
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


def _publish_frames(size: int, queue: str = QUEUE, headers: dict[str, Any] | None = None) -> bytes:
    """basic.publish to ``queue`` through the default exchange, its content header
    (persistent) and a body of ``size`` octets, framed on channel 1."""
    return (frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), 1)
            + frame.marshal(ContentHeader(body_size=size, properties=commands.Basic.Properties(
                delivery_mode=2, headers=headers)), 1)
            + frame.marshal(ContentBody(b"x" * size), 1))


async def raw_publish_confirm(port: int, count: int, size: int) -> float:
    """Seconds to publish ``count`` persistent messages with confirms, pre-encoded, one wait
    per 1,000 (written in one go; the next 1,000 once the broker confirmed them all)."""
    one = _publish_frames(size)
    client = await _confirming(port)
    start = time.perf_counter()
    await _publish_in_confirmed_batches(client, lambda first, n: one * n, count)
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


async def raw_drain(port: int, count: int, queue: str = QUEUE, started: asyncio.Event | None = None) -> float:
    client = await RawClient.connect(port)
    client.send(1, commands.Basic.Qos(prefetch_count=PREFETCH))
    await client.expect(commands.Basic.QosOk)
    client.send(1, commands.Basic.Consume(queue=queue, consumer_tag="raw"))
    start = time.perf_counter()
    await client.expect(commands.Basic.ConsumeOk)
    if started is not None:
        started.set()
    buf = client.buf
    got = 0
    while got < count:
        last = 0
        for kind, pos in await client.read_frames(1 << 18):
            if kind == 1 and buf[pos + 7:pos + 11] == _DELIVER:
                got += 1
                if got % ACK_EVERY == 0 or got == count:
                    last = _U64.unpack_from(buf, pos + 12 + buf[pos + 11])[0]
        client.release()
        if last:
            client.writer.write(frame.marshal(commands.Basic.Ack(last, multiple=True), 1))
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


def _raw_consumer(port: int, total: int, pipe) -> None:
    """The raw latency consumer's process (uvloop): prefetch 1,000, ack multiple every 100;
    a body's receive time is when the read that completed it returned."""
    try:
        pipe.send(uvloop.run(_raw_consume(port, total, pipe)))
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        pipe.send(f"consumer failed: {exc!r}")


async def _raw_consume(port: int, total: int, pipe) -> list[float]:
    client = await RawClient.connect(port)
    client.send(1, commands.Basic.Qos(prefetch_count=PREFETCH))
    await client.expect(commands.Basic.QosOk)
    client.send(1, commands.Basic.Consume(queue=QUEUE, consumer_tag="raw-latency", no_ack=False))
    await client.expect(commands.Basic.ConsumeOk)
    pipe.send("ready")
    buf = client.buf
    latencies: list[float] = []
    tag = acked = 0
    while len(latencies) < total:
        frames = await client.read_frames(timeout=LATENCY_SECONDS + 30)
        now = client.read_at
        for kind, pos in frames:
            if kind == 1 and buf[pos + 7:pos + 11] == _DELIVER:
                tag = _U64.unpack_from(buf, pos + 12 + buf[pos + 11])[0]
            elif kind == 3:
                latencies.append((now - _I64.unpack_from(buf, pos + 7)[0]) / 1e6)
        client.release()
        if len(latencies) - acked >= ACK_EVERY or len(latencies) >= total:
            client.writer.write(frame.marshal(commands.Basic.Ack(tag, multiple=True), 1))
            acked = len(latencies)
    await client.writer.drain()
    await client.close()
    return latencies


async def _raw_paced_publish(port: int, rate: int, total: int) -> None:
    """Pre-encoded persistent 100 B publishes (no confirms), each body's first 8 octets the
    send time (perf_counter_ns), written one at a time at ``rate``: asyncio sleeps until the
    next is due (the loop's timers have about 1 ms of grain, so at 1,000 msg/s a late wake-up
    sends the ones due back to back)."""
    client = await RawClient.connect(port)
    full = _publish_frames(100)
    head, tail = full[:-101], full[-93:]  # up to the body's payload; its last 92 octets and frame end
    start = time.perf_counter()
    for i in range(total):
        wait = start + i / rate - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        client.writer.write(head + _I64.pack(time.perf_counter_ns()) + tail)
    await client.writer.drain()
    await client.close()


def raw_latency(port: int, rate: int) -> tuple[float, float]:
    """p50 and p99 (ms) of publish-to-delivery at ``rate`` msg/s with the raw clients: the
    paced publisher in this process, the consumer in its own."""
    return _latency_run(port, rate, _raw_consumer, lambda total: asyncio.run(_raw_paced_publish(port, rate, total)))

# ---------------------------------------------------------------------- dead-lettering
DLX_EXCHANGE, DLX_QUEUE, TTL_QUEUE = "bench-dlx", "bench-expired", "bench-ttl"


def reset_dlx(port: int, ttl_ms: int) -> None:
    """A durable TTL queue dead-lettering into a fanout exchange with one durable queue;
    both empty."""
    with pika.BlockingConnection(_params(port)) as conn:
        ch = conn.channel()
        ch.exchange_declare(DLX_EXCHANGE, "fanout", durable=True)
        ch.queue_declare(DLX_QUEUE, durable=True)
        ch.queue_bind(DLX_QUEUE, DLX_EXCHANGE)
        ch.queue_declare(TTL_QUEUE, durable=True, arguments={"x-message-ttl": ttl_ms,
                                                             "x-dead-letter-exchange": DLX_EXCHANGE})
        ch.queue_purge(TTL_QUEUE)
        ch.queue_purge(DLX_QUEUE)


async def dlx_expiry(port: int, count: int) -> float:
    """Seconds from the first publish into TTL_QUEUE (nobody consumes it) to the last
    dead-lettered delivery from DLX_QUEUE."""
    started = asyncio.Event()
    drain = asyncio.ensure_future(raw_drain(port, count, DLX_QUEUE, started))
    await started.wait()
    client = await _confirming(port)
    start = time.perf_counter()
    await _publish_windowed(client, _publish_frames(100, TTL_QUEUE), count)
    await drain
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


# ---------------------------------------------------------------------- cases
def throughput(target: Target, fn: Callable[[], float], count: int) -> tuple[float, float, float]:
    """msg/s, broker CPU µs per message and client (this process) CPU µs per message."""
    cpu0 = cpu_seconds(target.pid, target.group)
    client0 = time.process_time()
    elapsed = fn()
    client = time.process_time() - client0
    cpu = cpu_seconds(target.pid, target.group) - cpu0
    return count / elapsed, cpu * 1e6 / count, client * 1e6 / count


def ceiling_drain(count: int, size: int) -> tuple[float, float, float]:
    """The pika drain against bench/amqp_frames_server.py (pre-rendered deliveries only):
    what pika itself can take; the server's CPU in the middle."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "amqp_frames_server.py"), str(port), str(count), str(size)])
    try:
        wait_for_port(port, proc)
        return throughput(Target("ceiling", port, proc.pid, lambda: None), lambda: pika_drain(port, count), count)
    finally:
        proc.terminate()
        proc.wait(60)


@dataclass
class Case:
    """One measurement pass on one broker: rows by name, each (msg/s, broker cpu µs, client
    cpu µs) or, for latency rows, (p50 ms, p99 ms). ``ceiling``, if set, runs once per pass
    after the brokers' turns (no broker: the pika drain against pre-rendered frames)."""

    name: str
    run: Callable[[Target], dict[str, tuple[float, ...]]]
    mine: str  # which Rocketport: "sync" or "async"
    ceiling: Callable[[], dict[str, tuple[float, ...]]] | None = None


def cases(count: int, raw_count: int, raw_sync_count: int, only: set[str], rates: list[int],
          dlx_count: int = 100_000, dlx_ttl_ms: int = 100) -> list[Case]:
    out: list[Case] = []
    if "pika" in only:
        for size, label in ((100, "100B"), (1024, "1KiB")):
            def pika_pass(t: Target, size: int = size, label: str = label) -> dict[str, tuple[float, ...]]:
                reset_queue(t.port)
                return {f"publish_{label}_pika": throughput(t, lambda: pika_publish(t.port, count, size), count),
                        f"drain_{label}_pika": throughput(t, lambda: pika_drain(t.port, count), count)}

            def pika_ceiling(size: int = size, label: str = label) -> dict[str, tuple[float, ...]]:
                return {f"drain_{label}_pika": ceiling_drain(count, size)}
            out.append(Case(f"pika_{label}", pika_pass, "sync", pika_ceiling if "ceiling" in only else None))
    if "typed" in only:
        def typed_pass(t: Target) -> dict[str, tuple[float, ...]]:
            reset_queue(t.port)
            typed = {"publish_100B_pika_typed_headers": throughput(
                t, lambda: pika_publish(t.port, count, 100, typed_headers), count)}
            reset_queue(t.port)
            typed["publish_100B_raw_typed_headers"] = throughput(
                t, lambda: asyncio.run(raw_publish_typed(t.port, count, 100)), count)
            return typed
        out.append(Case("typed", typed_pass, "sync"))
    if "aio_pika" in only:
        for size, label in ((100, "100B"), (1024, "1KiB")):
            def aio_pass(t: Target, size: int = size, label: str = label) -> dict[str, tuple[float, ...]]:
                reset_queue(t.port)
                return {f"publish_{label}_aio_pika": throughput(
                            t, lambda: uvloop.run(aio_pika_publish(t.port, count, size)), count),
                        f"drain_{label}_aio_pika": throughput(
                            t, lambda: uvloop.run(aio_pika_drain(t.port, count)), count)}
            out.append(Case(f"aio_pika_{label}", aio_pass, "sync"))
    if "raw" in only:
        def raw_pass(t: Target) -> dict[str, tuple[float, ...]]:
            reset_queue(t.port)
            return {"publish_100B_raw": throughput(t, lambda: asyncio.run(raw_publish(t.port, raw_count, 100)),
                                                   raw_count),
                    "drain_100B_raw": throughput(t, lambda: asyncio.run(raw_drain(t.port, raw_count)), raw_count)}
        out.append(Case("raw", raw_pass, "async"))
    if "raw_sync" in only:
        def raw_sync_pass(t: Target) -> dict[str, tuple[float, ...]]:
            reset_queue(t.port)
            return {"publish_100B_raw_confirm": throughput(
                        t, lambda: asyncio.run(raw_publish_confirm(t.port, raw_sync_count, 100)), raw_sync_count),
                    "drain_100B_raw_sync": throughput(
                        t, lambda: asyncio.run(raw_drain(t.port, raw_sync_count)), raw_sync_count)}
        out.append(Case("raw_sync", raw_sync_pass, "sync"))
    if "dlx" in only:
        def dlx_pass(t: Target) -> dict[str, tuple[float, ...]]:
            reset_dlx(t.port, dlx_ttl_ms)
            return {"dlx_expiry_100B_raw": throughput(t, lambda: asyncio.run(dlx_expiry(t.port, dlx_count)),
                                                      dlx_count)}
        out.append(Case("dlx", dlx_pass, "async"))
    if "latency" in only:
        for rate in rates:
            # RabbitMQ hands a persistent message to consumers before its fsync; Rocketport
            # does so under ASYNC_FLUSH, and after the covering fsync under SYNC_FLUSH
            for mode in ("async", "sync"):
                def latency(t: Target, rate: int = rate, mode: str = mode) -> dict[str, tuple[float, ...]]:
                    reset_queue(t.port)
                    return {f"latency_{rate}_per_s_{mode}": pika_latency(t.port, rate)}
                out.append(Case(f"latency_{rate}_{mode}", latency, mode))
    if "raw_latency" in only and 1000 in rates:
        for mode in ("async", "sync"):
            def latency_raw(t: Target, mode: str = mode) -> dict[str, tuple[float, ...]]:
                reset_queue(t.port)
                return {f"latency_1000_per_s_raw_{mode}": raw_latency(t.port, 1000)}
            out.append(Case(f"latency_1000_raw_{mode}", latency_raw, mode))
    return out


def report(name: str, mine: list[tuple[float, ...]], peer: list[tuple[float, ...]],
           ceiling: list[tuple[float, ...]] | None = None) -> None:
    extra: dict[str, Any] = {}
    if name.startswith("latency"):
        mine_pass = sorted(mine, key=lambda r: r[1])[len(mine) // 2]  # the median pass by p99
        worst = max(r[1] for r in mine)
        if peer:
            peer_pass = sorted(peer, key=lambda r: r[1])[len(peer) // 2]
            extra = {"peer": "rabbitmq", "peer_value": round(peer_pass[1], 2),
                     "peer_p50_ms": round(peer_pass[0], 2), "peer_worst_p99_ms": round(max(r[1] for r in peer), 2),
                     "runs": [[round(v, 2) for v in r] for r in mine],
                     "peer_runs": [[round(v, 2) for v in r] for r in peer]}
        floor = extra.get("peer_value") if name.startswith("latency_1000_") else None
        emit(f"{name}_p99", mine_pass[1], "ms", floor, p50_ms=round(mine_pass[0], 2),
             worst_p99_ms=round(worst, 2), **extra)
        return
    best = max(mine)
    runs = [round(r[0], 1) for r in mine]
    if peer:
        peer_best = max(peer)
        extra = {"peer": "rabbitmq", "peer_value": round(peer_best[0], 1), "ratio": round(best[0] / peer_best[0], 2),
                 "peer_cpu_us_per_msg": round(peer_best[1], 1),
                 "peer_client_cpu_us_per_msg": round(peer_best[2], 1), "peer_runs": [round(r[0], 1) for r in peer]}
    if ceiling:
        extra["ceiling"] = round(max(ceiling)[0], 1)
    if name.startswith("dlx_"):  # no slower than RabbitMQ
        floor: float | None = extra.get("peer_value")
    elif name.endswith("_raw"):
        floor = 150_000 if name.startswith("publish") else 200_000
    else:
        floor = 2 * extra["peer_value"] if peer and "100B" in name else None
    emit(name, best[0], "msg/s", floor, cpu_us_per_msg=round(best[1], 1), client_cpu_us_per_msg=round(best[2], 1),
         runs=runs, **extra)
    if ceiling:
        top = max(ceiling)
        emit(f"{name}_ceiling", top[0], "msg/s", None, client_cpu_us_per_msg=round(top[2], 1),
             server_cpu_us_per_msg=round(top[1], 1), runs=[round(r[0], 1) for r in ceiling])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--raw-messages", type=int, default=200_000)
    parser.add_argument("--raw-sync-messages", type=int, default=100_000)
    parser.add_argument("--dlx-messages", type=int, default=100_000)
    parser.add_argument("--dlx-ttl-ms", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--skip-rabbitmq", action="store_true")
    parser.add_argument("--latency-rates", default="1000,10000",
                        help="msg/s of the latency cases (the raw ones run at 1000 only)")
    parser.add_argument("--only", default="pika,ceiling,typed,aio_pika,raw,raw_sync,dlx,latency,raw_latency",
                        help="pika, ceiling (with pika), typed, aio_pika, raw, raw_sync, dlx, latency, "
                             "raw_latency (comma-separated)")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="amqp-bench-")
    targets: dict[str, Target] = {}
    peer: Target | None = None
    try:
        targets["sync"] = start_rocketport(workdir, "SYNC_FLUSH")
        targets["async"] = start_rocketport(workdir, "ASYNC_FLUSH")
        peer = None if args.skip_rabbitmq else start_rabbit(workdir)
        for case in cases(args.messages, args.raw_messages, args.raw_sync_messages, set(args.only.split(",")),
                          [int(r) for r in args.latency_rates.split(",")], args.dlx_messages, args.dlx_ttl_ms):
            mine: dict[str, list[tuple[float, ...]]] = {}
            theirs: dict[str, list[tuple[float, ...]]] = {}
            ceilings: dict[str, list[tuple[float, ...]]] = {}
            for n in range(args.passes):  # the brokers take turns; who goes first alternates
                order = [(targets[case.mine], mine)] + ([(peer, theirs)] if peer else [])
                for target, into in (order if n % 2 == 0 else order[::-1]):
                    for row, value in case.run(target).items():
                        into.setdefault(row, []).append(value)
                if case.ceiling is not None:
                    for row, value in case.ceiling().items():
                        ceilings.setdefault(row, []).append(value)
            for row, values in mine.items():
                report(row, values, theirs.get(row, []), ceilings.get(row))
    finally:  # a case that fails must not leave a RabbitMQ node running
        for target in [*targets.values(), *([peer] if peer is not None else [])]:
            target.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
