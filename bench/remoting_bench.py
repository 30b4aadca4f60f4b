"""Remoting front-end throughput and latency with Rocketport's own pipelined load generator.

The broker runs in its own process (uvloop, ASYNC_FLUSH, a temporary store); load
generator processes each open a few connections and keep a fixed window of requests in
flight on every one, matching responses by opaque. Prints one JSON object per case:
    python bench/remoting_bench.py [--quick] [--dir DIR] [--acl]
Cases: single sends of 100 B and 1 KiB (64 in flight per connection; p50/p99 latency),
batch sends (100 messages per request), and pulls of the queues the batch cases filled
(32 and 256 messages per request, as push consumers and tuned pull consumers ask).
Latency is per request, measured by the generator from write to response. A pull counts the
messages its nextBeginOffset says it returned, checked against the body length.
With --acl the broker runs with aclEnable and every request is signed (HMAC-SHA1, one per
pull, once per send template): the cost of access control, rows named ``<case>_acl``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import hmac
import json
import multiprocessing as mp
import os
import re
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass

from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.core.auth.plain_acl import sign
from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.frame import JsonFrameTemplate
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2

FLOORS = {
    "send_single_100B": 50_000,
    "send_single_1KiB": 50_000,
    "send_batch100_100B": 200_000,
    "send_batch100_1KiB": 200_000,
    "pull_32_100B": 500_000,
    "pull_256_100B": 500_000,
    "pull_32_1KiB": 500_000,
}


def _run_loop(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


# ------------------------------------------------------------------ broker process
def _broker_main(store_dir: str, ready: mp.connection.Connection, acl_file: str | None) -> None:
    from rocketport.server import BrokerServer

    async def serve() -> None:
        config = BrokerConfig(store_path_root_dir=store_dir, listen_port=0,
                              namesrv=ProtocolConfig(False, 0), kafka=ProtocolConfig(False, 0),
                              amqp=ProtocolConfig(False, 0), stomp=ProtocolConfig(False, 0),
                              acl_enable=acl_file is not None, plain_acl_file=acl_file or "")
        server = BrokerServer(config)
        await server.start()
        ready.send(server.front_ends["remoting"].listener.port)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_reader(ready.fileno(), stop.set)  # parent closes or writes: stop
        await stop.wait()
        await server.stop()

    _run_loop(serve())


# ------------------------------------------------------------------ load generator
@dataclass(slots=True)
class Case:
    name: str
    kind: str  # "send" | "batch" | "pull"
    size: int
    per_request: int  # messages per request (batch size; pull max)
    window: int  # requests in flight per connection
    connections: int
    seconds: float
    topic: str
    credentials: tuple[str, str] | None = None  # sign every request (--acl)


BENCH_ACL = """\
accounts:
  - accessKey: bench
    secretKey: bench-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
_PREFIX = struct.Struct(">iI")
_RESPONSE_CODE = re.compile(rb'"code":(-?\d+)')
_RESPONSE_OPAQUE = re.compile(rb'"opaque":(-?\d+)')
_NEXT_OFFSET = re.compile(rb'"nextBeginOffset":"(\d+)"')
_RECORD_MIN = 100  # bytes: a stored message's fixed header alone is larger


class _Request:
    """One case's request, rendered per send from the codec's own frame template (new
    opaque, and queue offset for pulls): the generator must cost far less than the broker."""

    def __init__(self, case: Case, queue_id: int, body: bytes) -> None:
        self.pull = case.kind == "pull"
        self.credentials = case.credentials
        if self.pull:
            self.body = b""
            ext: dict[str, str | type] = {
                "consumerGroup": "bench", "topic": case.topic, "queueId": str(queue_id),
                "queueOffset": int, "maxMsgNums": str(case.per_request), "sysFlag": "0",
                "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                "subVersion": "0"}
            if self.credentials:  # signed per request: the offset changes
                ext["AccessKey"] = self.credentials[0]
                ext["Signature"] = bytes
                text = "".join("\0" if v is int else v for k, v in sorted(ext.items()) if k != "Signature")
                self.signed_around = tuple(part.encode() for part in text.split("\0"))
            self.template = JsonFrameTemplate(RequestCode.PULL_MESSAGE, ext, flag=0)
            return
        batch = case.kind == "batch"
        header = SendMessageRequestHeader("bench", case.topic, "TBW102", 8, queue_id, 0,
                                          int(time.time() * 1000), 0, "TAGS\x01bench\x02", batch=batch)
        self.body = body
        ext = dict(encode_send_message_header_v2(header))
        if self.credentials:
            ext["AccessKey"] = self.credentials[0]
            text = "".join(v for _, v in sorted(ext.items()))
            ext["Signature"] = sign(text.encode() + body, self.credentials[1])
        self.template = JsonFrameTemplate(
            RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2, ext, flag=0)

    def render(self, opaque: int, offset: int) -> list[bytes]:
        if self.pull:
            if self.credentials:
                before, after = self.signed_around
                mac = hmac.new(self.credentials[1].encode(), before + b"%d" % offset + after, "sha1")
                signature = base64.b64encode(mac.digest())
                return [self.template.frame(opaque, 0, offset, signature)]
            return [self.template.frame(opaque, 0, offset)]
        return [self.template.frame(opaque, 0, body_size=len(self.body)), self.body]


class _Pipeline(asyncio.Protocol):
    """One connection keeping `window` requests in flight until the deadline."""

    def __init__(self, case: Case, index: int, deadline: float, done: asyncio.Future) -> None:
        self.case = case
        self.deadline = deadline
        self.done = done
        self.buffer = bytearray()
        self.sent_at: dict[int, tuple[float, int]] = {}  # opaque -> (sent at, pull offset)
        self.latencies: list[float] = []
        self.messages = 0
        self.errors = 0
        self.opaque = 0
        self.pull_offset = 0
        body = os.urandom(case.size // 2).hex().encode()[: case.size]
        if case.kind == "batch":
            body = encode_batch([BatchMessage(body, {"TAGS": "bench"})] * case.per_request)
        self.template = _Request(case, index % 8, body)

    def connection_made(self, transport) -> None:
        self.transport = transport
        out: list[bytes] = []
        for _ in range(self.case.window):
            self._issue(out, time.perf_counter())
        transport.writelines(out)

    def _issue(self, out: list[bytes], now: float) -> None:
        """Queue the next request; the caller writes a whole read's worth at once, as a
        pipelining client does (one syscall per read, not per request)."""
        self.opaque += 1
        out += self.template.render(self.opaque, self.pull_offset)
        self.sent_at[self.opaque] = (now, self.pull_offset)
        if self.case.kind == "pull":
            self.pull_offset += self.case.per_request

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buf = self.buffer
        buf += data
        pos = 0
        out: list[bytes] = []
        while len(buf) - pos >= 8:
            total, word = _PREFIX.unpack_from(buf, pos)
            if len(buf) - pos < 4 + total:
                break
            header_end = pos + 8 + (word & 0xFFFFFF)
            header = bytes(buf[pos + 8:header_end])
            body = memoryview(buf)[header_end:pos + 4 + total]
            pos += 4 + total
            code = int(_RESPONSE_CODE.search(header)[1])
            started, offset = self.sent_at.pop(int(_RESPONSE_OPAQUE.search(header)[1]))
            self.latencies.append(now - started)
            if code == ResponseCode.SUCCESS:
                if self.case.kind == "pull":  # what the offsets say came, checked against the body
                    count = int(_NEXT_OFFSET.search(header)[1]) - offset
                    if not 0 < count * _RECORD_MIN <= len(body):
                        raise RuntimeError(f"{len(body)} bytes cannot hold {count} messages")
                    self.messages += count
                else:
                    self.messages += self.case.per_request
            elif self.case.kind == "pull" and code in (ResponseCode.PULL_NOT_FOUND,
                                                       ResponseCode.PULL_OFFSET_MOVED):
                self.pull_offset = 0  # wrap around the pre-filled queue
            else:
                self.errors += 1
            body.release()
            if now < self.deadline:
                self._issue(out, now)
            elif not self.sent_at and not self.done.done():
                self.done.set_result(None)
        del buf[:pos]
        if out:
            self.transport.writelines(out)


async def _drive(port: int, case: Case) -> dict:
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + case.seconds
    pipes = []
    for i in range(case.connections):
        done = loop.create_future()
        _, proto = await loop.create_connection(lambda i=i, d=done: _Pipeline(case, i, deadline, d),
                                                "127.0.0.1", port)
        pipes.append(proto)
    start = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(p.done for p in pipes)), case.seconds + 30)
    elapsed = time.perf_counter() - start
    for p in pipes:
        p.transport.close()
    latencies = sorted(x for p in pipes for x in p.latencies)
    return {"messages": sum(p.messages for p in pipes), "errors": sum(p.errors for p in pipes),
            "elapsed": elapsed, "latencies": latencies[:: max(1, len(latencies) // 20000)]}


def _generator_main(port: int, case: Case, out: mp.connection.Connection) -> None:
    cpu = time.process_time()
    result = _run_loop(_drive(port, case))
    result["cpu_s"] = time.process_time() - cpu
    out.send(result)


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (Linux /proc), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_idle(pid: int, timeout: float = 15.0) -> None:
    """Until the broker uses under 5% of a CPU over 200 ms (or ``timeout``): the sends just
    measured leave a flush and the index build of their keys running for about a second, and
    a pull case must measure pulls, not that catch-up."""
    deadline = time.monotonic() + timeout
    before = _cpu_seconds(pid)
    while before is not None and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _cpu_seconds(pid)
        if after is None or after - before < 0.01:
            return
        before = after


def run_case(port: int, case: Case, processes: int, broker_pid: int) -> dict:
    ctx = mp.get_context("spawn")
    if case.kind == "pull":
        _wait_idle(broker_pid)
    pipes, procs = [], []
    cpu_before = _cpu_seconds(broker_pid)
    for _ in range(processes):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_generator_main, args=(port, case, child))
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    results = [p.recv() for p in pipes]
    cpu_after = _cpu_seconds(broker_pid)
    for proc in procs:
        proc.join(30)
    messages = sum(r["messages"] for r in results)
    elapsed = max(r["elapsed"] for r in results)
    lat = sorted(x for r in results for x in r["latencies"])
    row = {"bench": "remoting", "case": case.name, "value": round(messages / elapsed, 1),
           "unit": "msg/s", "connections": case.connections * processes,
           "in_flight_per_connection": case.window, "messages_per_request": case.per_request,
           "errors": sum(r["errors"] for r in results)}
    if lat:
        row["latency_p50_ms"] = round(lat[len(lat) // 2] * 1000, 3)
        row["latency_p99_ms"] = round(lat[int(len(lat) * 0.99)] * 1000, 3)
    if cpu_before is not None and cpu_after is not None and messages:
        # The broker's own cost, so a loaded or small machine still shows its capacity.
        row["broker_cpu_s"] = round(cpu_after - cpu_before, 2)
        row["broker_cpu_us_per_msg"] = round((cpu_after - cpu_before) / messages * 1e6, 2)
    if messages:  # the generator's own cost: a generator near 1 s/s of CPU is the limit
        client_cpu = sum(r["cpu_s"] for r in results)
        row["client_cpu_s"] = round(client_cpu, 2)
        row["client_cpu_us_per_msg"] = round(client_cpu / messages * 1e6, 2)
    if case.name in FLOORS:
        row["floor"] = FLOORS[case.name]
        row["meets_floor"] = row["value"] >= FLOORS[case.name]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (CI smoke)")
    parser.add_argument("--dir", help="store directory parent (default: a temp dir)")
    parser.add_argument("--processes", type=int, default=1,
                        help="load generator processes (each competes with the broker for CPUs)")
    parser.add_argument("--acl", action="store_true",
                        help="broker with aclEnable, every request signed (rows <case>_acl)")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else 5.0
    store_dir = tempfile.mkdtemp(prefix="remoting-bench-", dir=args.dir)
    acl_file = None
    if args.acl:
        acl_file = os.path.join(store_dir, "plain_acl.yml")
        with open(acl_file, "w") as f:
            f.write(BENCH_ACL)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    broker = ctx.Process(target=_broker_main, args=(os.path.join(store_dir, "store"), child, acl_file))
    broker.start()
    try:
        port = parent.recv()
        cases = [
            Case("send_single_100B", "send", 100, 1, 64, 2, seconds, "BenchSend100"),
            Case("send_single_1KiB", "send", 1024, 1, 64, 2, seconds, "BenchSend1K"),
            Case("send_batch100_100B", "batch", 100, 100, 8, 2, seconds, "BenchBatch100"),
            Case("send_batch100_1KiB", "batch", 1024, 100, 8, 2, seconds, "BenchBatch1K"),
            Case("pull_32_100B", "pull", 100, 32, 16, 2, seconds, "BenchBatch100"),
            Case("pull_256_100B", "pull", 100, 256, 8, 2, seconds, "BenchBatch100"),
            Case("pull_32_1KiB", "pull", 1024, 32, 16, 2, seconds, "BenchBatch1K"),
        ]
        if args.acl:
            cases = [dataclasses.replace(c, name=c.name + "_acl", credentials=("bench", "bench-secret"))
                     for c in cases]
        for case in cases:
            print(json.dumps(run_case(port, case, args.processes, broker.pid)), flush=True)
    finally:
        parent.send("stop")
        broker.join(60)
        if broker.is_alive():
            broker.terminate()
        shutil.rmtree(store_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
