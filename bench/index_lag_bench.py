"""Index freshness: how long after a keyed message's acknowledgement a lookup by its key
finds it, per write path, at a sustained rate.

One broker process per path (a fresh store each, ASYNC_FLUSH, every front-end on free
loopback ports). A producer process of its own writes keyed 100 B messages at ``--rate``
msg/s for ``--seconds``, each with its own key: `kafka` (confluent-kafka, linger 5 ms, so
record batches of many records, each stored as one CommitLog entry), `remoting` (pipelined
SEND_MESSAGE_V2 single sends, KEYS set, pre-rendered frames) and `amqp` (pipelined
publishes with a KEYS header on a confirm channel, pre-encoded frames: the publish-run
path). Every PROBE_S the producer hands this process the key of a message just
acknowledged and when (CLOCK_MONOTONIC, the same clock in every process); this process looks
it up by key (remoting QUERY_MESSAGE through the native AdminClient, as `rocketport admin
queryMsgByKey` does), every POLL_S until found, and takes the newest sample when done.
`index_lag_ms` = found - acknowledged. The last key of the run is probed too (`last_ms`).

Rows: one per path, value = p99 (ms), with p50, max, the probes, the rate reached and the
broker's CPU. Floor 1,000 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import cpu_seconds, free_port, wait_for_port  # noqa: E402

PATHS = ("kafka", "remoting", "amqp")
FLOOR_MS = 1000.0
PROBE_S = 0.1  # a sample handed over this often
POLL_S = 0.005  # between two lookups of one key
GIVE_UP_S = 120.0  # a key not found by then counts as this lag
LOOKUP_TIMEOUT_S = 30.0  # one lookup's answer
TICK_S = 0.001  # the producers' pacing grain
WINDOW = 5000  # requests in flight (remoting, amqp)
BODY = b"x" * 100


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "index_lag", "case": case, "value": round(value, 1), "unit": unit,
                      "floor": floor, **extra}), flush=True)


class Ports:
    def __init__(self) -> None:
        self.remoting, self.namesrv, self.kafka, self.amqp = (free_port() for _ in range(4))


def start_broker(store: str, ports: Ports, log: Any) -> subprocess.Popen:
    settings = [f"storePathRootDir={store}", f"listenPort={ports.remoting}",
                f"namesrv.port={ports.namesrv}", f"kafka.port={ports.kafka}",
                f"amqp.port={ports.amqp}", "stomp.enabled=false", "http.port=0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "-c", "conf/broker.yaml",
         *(arg for s in settings for arg in ("--set", s))],
        stdout=subprocess.DEVNULL, stderr=log,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for port in (ports.remoting, ports.namesrv, ports.kafka, ports.amqp):
        wait_for_port(port, proc)
    return proc


# ------------------------------------------------------------------------------ producers
class Pacer:
    """How many messages are due by now at ``rate`` since the start."""

    def __init__(self, rate: int, seconds: float) -> None:
        self.rate, self.start = rate, time.monotonic()
        self.end = self.start + seconds
        self.next_sample = self.start

    def due(self) -> int:
        return int((min(time.monotonic(), self.end) - self.start) * self.rate)

    def done(self) -> bool:
        return time.monotonic() >= self.end

    def sample_due(self) -> bool:
        now = time.monotonic()
        if now < self.next_sample:
            return False
        self.next_sample = now + PROBE_S
        return True


def _produce_kafka(ports: Ports, topic: str, rate: int, seconds: float, out) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports.kafka}", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "acks": "all"})

    def acked(err, msg) -> None:
        if err is None:
            out.send((msg.key().decode(), time.monotonic()))

    pacer = Pacer(rate, seconds)
    sent = 0
    while not pacer.done():
        for n in range(sent, pacer.due()):
            key = b"kafka-%d" % n
            if pacer.sample_due():
                producer.produce(topic, BODY, key, on_delivery=acked)
            else:
                producer.produce(topic, BODY, key)
        sent = max(sent, pacer.due())
        producer.poll(TICK_S)
    last = b"kafka-last"
    producer.produce(topic, BODY, last, on_delivery=acked)
    producer.flush(60)
    return sent + 1


async def _produce_remoting(ports: Ports, topic: str, rate: int, seconds: float, out) -> int:
    import re

    from rocketport.protocols.remoting.codes import RequestCode
    from rocketport.protocols.remoting.frame import JsonFrameTemplate, json_text
    from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2

    from rocketport.client import AdminClient

    async with AdminClient(f"127.0.0.1:{ports.namesrv}") as admin:  # the topic, before the sends
        await admin.create_topic(topic)
    header = SendMessageRequestHeader("bench", topic, "TBW102", 8, 0, 0, int(time.time() * 1000),
                                      0, "PROPS", batch=False)
    ext = dict(encode_send_message_header_v2(header))
    props_key = next(k for k, v in ext.items() if v == "PROPS")
    ext[props_key] = bytes
    template = JsonFrameTemplate(RequestCode.SEND_MESSAGE_V2, ext, flag=0)
    head, tail = json_text(b"KEYS\x01"), json_text(b"\x02")
    opaque_re = re.compile(rb'"opaque":(\d+)')
    reader, writer = await asyncio.open_connection("127.0.0.1", ports.remoting)
    loop = asyncio.get_running_loop()
    waiting: dict[int, str] = {}  # opaque -> key of a sampled send
    answered = 0
    buf = bytearray()

    async def read() -> None:
        nonlocal answered
        while True:
            data = await reader.read(1 << 18)
            if not data:
                return
            buf.extend(data)
            pos = 0
            while len(buf) - pos >= 8:
                total = int.from_bytes(buf[pos:pos + 4], "big")
                if len(buf) - pos < 4 + total:
                    break
                if waiting:
                    header_len = int.from_bytes(buf[pos + 5:pos + 8], "big")
                    opaque = int(opaque_re.search(buf, pos + 8, pos + 8 + header_len)[1])
                    key = waiting.pop(opaque, None)
                    if key is not None:
                        out.send((key, time.monotonic()))
                pos += 4 + total
                answered += 1
            del buf[:pos]

    reading = loop.create_task(read())
    pacer = Pacer(rate, seconds)
    sent = 0

    def send(n: int, key: bytes, sample: bool) -> None:
        if sample:
            waiting[n + 1] = key.decode()
        writer.write(template.frame(n + 1, 0, head + key + tail, body_size=len(BODY)))
        writer.write(BODY)

    while not pacer.done():
        due = pacer.due()
        while sent < due and sent - answered < WINDOW:
            send(sent, b"remoting-%d" % sent, pacer.sample_due())
            sent += 1
        await asyncio.sleep(TICK_S)
    send(sent, b"remoting-last", True)
    sent += 1
    while answered < sent and not reading.done():
        await asyncio.sleep(0.01)
    writer.close()
    reading.cancel()
    return sent


async def _produce_amqp(ports: Ports, topic: str, rate: int, seconds: float, out) -> int:
    from pamqp import commands, frame
    from pamqp.body import ContentBody
    from pamqp.header import ContentHeader

    from amqp_bench import RawClient, _read_confirms

    client = await RawClient.connect(ports.amqp)
    client.send(1, commands.Exchange.Declare(exchange=topic, exchange_type="fanout"))
    await client.expect(commands.Exchange.DeclareOk)
    client.send(1, commands.Confirm.Select())
    await client.expect(commands.Confirm.SelectOk)
    width = 12  # the key's digits: fixed, so one pre-encoded publish serves every message
    marker = b"#" * width
    whole = (frame.marshal(commands.Basic.Publish(exchange=topic, routing_key=""), 1)
             + frame.marshal(ContentHeader(body_size=len(BODY), properties=commands.Basic.Properties(
                 delivery_mode=2, headers={"KEYS": "amqp-" + marker.decode()})), 1)
             + frame.marshal(ContentBody(BODY), 1))
    before, after = whole.split(marker)
    waiting: dict[int, str] = {}  # delivery tag -> key of a sampled publish
    confirmed = 0
    pacer = Pacer(rate, seconds)
    sent = 0

    async def confirms() -> None:
        nonlocal confirmed
        while True:
            confirmed = await _read_confirms(client, confirmed)
            now = time.monotonic()
            for tag in [t for t in waiting if t <= confirmed]:
                out.send((waiting.pop(tag), now))

    reading = asyncio.get_running_loop().create_task(confirms())

    def publish(n: int, digits: bytes, sample: bool) -> None:
        if sample:
            waiting[n + 1] = "amqp-" + digits.decode()
        client.writer.write(before + digits + after)

    while not pacer.done():
        due = pacer.due()
        while sent < due and sent - confirmed < WINDOW:
            publish(sent, b"%0*d" % (width, sent), pacer.sample_due())
            sent += 1
        await asyncio.sleep(TICK_S)
    publish(sent, b"9" * width, True)  # the last key
    sent += 1
    while confirmed < sent and not reading.done():
        await asyncio.sleep(0.01)
    reading.cancel()
    await client.close()
    return sent


def producer_main(path: str, ports: Ports, topic: str, rate: int, seconds: float, out) -> None:
    """A producer process: samples (key, acknowledged at) through ``out``, then
    ("done", messages, seconds)."""
    started = time.monotonic()
    if path == "kafka":
        sent = _produce_kafka(ports, topic, rate, seconds, out)
    else:
        import uvloop
        coro = _produce_remoting if path == "remoting" else _produce_amqp
        sent = uvloop.run(coro(ports, topic, rate, seconds, out))
    out.send(("done", sent, time.monotonic() - started))


# ------------------------------------------------------------------------------- prober
async def probe(ports: Ports, topic: str, samples) -> tuple[list[float], float | None, int, float]:
    """Look each newest sample up until found: (lags ms, the last key's lag, messages, s)."""
    from rocketport.client import AdminClient, ClientError

    async def found(admin: AdminClient, key: str) -> bool:
        try:
            return bool(await admin.query_by_key(topic, key, max_num=1))
        except ClientError:  # no answer in time: a broker too busy to answer is not finding it
            return False

    lags: list[float] = []
    last: float | None = None
    total, elapsed = 0, 0.0
    finished = False
    async with AdminClient(f"127.0.0.1:{ports.namesrv}", timeout_s=LOOKUP_TIMEOUT_S) as admin:
        while True:
            sample = None
            while not finished and samples.poll():
                try:
                    got = samples.recv()
                except EOFError:
                    raise RuntimeError("the producer process ended without its totals") from None
                if got[0] == "done":
                    _, total, elapsed = got
                    finished = True
                else:
                    sample = got
            if sample is None:
                if finished:
                    return lags, last, total, elapsed
                await asyncio.sleep(POLL_S)
                continue
            key, acked = sample
            while not await found(admin, key):
                if time.monotonic() - acked > GIVE_UP_S:
                    break
                await asyncio.sleep(POLL_S)
            lag = (time.monotonic() - acked) * 1000
            if key.endswith("last") or key.endswith("9" * 12):
                last = lag
            else:
                lags.append(lag)


def run_path(path: str, rate: int, seconds: float, workdir: str) -> None:
    ports = Ports()
    store = os.path.join(workdir, path)
    with open(os.path.join(workdir, f"{path}.log"), "w") as log:
        broker = start_broker(store, ports, log)
        try:
            cpu = cpu_seconds(broker.pid)
            topic = f"IndexLag_{path}"
            ctx = mp.get_context("spawn")
            receive, send = ctx.Pipe(duplex=False)
            producer = ctx.Process(target=producer_main, args=(path, ports, topic, rate, seconds, send))
            producer.start()
            send.close()
            try:
                lags, last, total, elapsed = asyncio.run(probe(ports, topic, receive))
            finally:
                producer.join(60)
                if producer.exitcode != 0:
                    print(f"{path}: the producer exited with {producer.exitcode}", file=sys.stderr)
            cpu = cpu_seconds(broker.pid) - cpu
        finally:
            broker.terminate()
            broker.wait(60)
    lags.sort()
    if not lags:
        raise RuntimeError(f"{path}: no sample was probed")
    emit(f"index_lag_ms_{path}", lags[int(0.99 * (len(lags) - 1))], "ms", FLOOR_MS,
         p50=round(statistics.median(lags), 1), p99=round(lags[int(0.99 * (len(lags) - 1))], 1),
         max=round(lags[-1], 1), last_ms=round(last, 1) if last is not None else None,
         probes=len(lags), target_rate=rate, rate=round(total / elapsed) if elapsed else None,
         seconds=seconds, broker_cpu_s=round(cpu, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="sustained write per path")
    parser.add_argument("--rate", type=int, default=50_000, help="keyed messages a second")
    parser.add_argument("--only", default=",".join(PATHS), help="paths: kafka,remoting,amqp")
    parser.add_argument("--dir", help="where the stores go (default: a temporary directory)")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="index-lag-", dir=args.dir)
    try:
        for path in args.only.split(","):
            if path not in PATHS:
                parser.error(f"unknown path {path!r}")
            run_path(path, args.rate, args.seconds, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
