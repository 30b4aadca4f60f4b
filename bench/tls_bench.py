"""TLS against plaintext, side by side in one run: Kafka raw produce and fetch (100 B, 1 KiB),
AMQP raw publish with confirms and drain (100 B, 1 KiB), and TLS handshakes a second.

Run: python bench/tls_bench.py [--messages N] [--passes P] [--only CASES] [--sizes 100,1024] [--baseline REV]
One broker subprocess (uvloop) serves each protocol on its plaintext port and on its
tlsPort, with a throwaway CA and an ECDSA P-256 server certificate (tests/tls/certs.py);
the bench's raw clients (bench/kafka_bench.py, bench/amqp_bench.py, on uvloop) are the same
on both ports, TLS added by the client's asyncio.open_connection. Plain and TLS passes alternate;
each row is the best pass: {"bench": "tls", "case": ..., "value": TLS msg/s, "plain": ...,
"ratio": TLS/plain, "floor": 0.5 (100 B) or 0.7 (1 KiB)}. handshakes_per_s: sequential
connect + TLS handshake + close from one client (TLS 1.3, no session resumption).
Each row also has the broker's and the client's CPU µs per message, TLS and plain
(broker_us_per_msg, plain_broker_us_per_msg, client_us_per_msg, plain_client_us_per_msg).
kafka_kcat_fetch_1KiB: kcat (librdkafka in C) reads the 1 KiB topic from the beginning,
plain and SSL, when kcat is installed: the raw client decrypts through Python's memory
BIOs and is itself the bound of kafka_raw_fetch_1KiB over TLS (its client_us_per_msg).
--only runs some of the cases (produce, fetch, publish, drain, kcat, handshakes; a fetch or
kcat row still produces its topic first, untimed), --sizes some of the sizes. --baseline REV
runs a second broker process on commit REV's code (kafka_bench.baseline_env) beside this
tree's, the passes interleaved, its rows marked "code": "baseline".
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import amqp_bench  # noqa: E402
import kafka_bench  # noqa: E402
from procs import free_port, wait_for_port  # noqa: E402

from tests.tls.certs import make_pki  # noqa: E402

TLS_PORTS: dict[int, ssl.SSLContext] = {}
_open_connection = asyncio.open_connection


async def _open(host: str, port: int, **kwargs: Any):  # type: ignore[no-untyped-def]
    """asyncio.open_connection with TLS for the ports in TLS_PORTS (the bench clients call it)."""
    context = TLS_PORTS.get(port)
    if context is not None:
        kwargs.setdefault("ssl", context)
        kwargs.setdefault("server_hostname", "localhost")
    return await _open_connection(host, port, **kwargs)


asyncio.open_connection = _open  # type: ignore[assignment]


def emit(case: str, tls_value: float, plain: float | None, unit: str, floor: float | None,
         cpu: dict[str, Any] | None = None) -> None:
    row = {"bench": "tls", "case": case, "value": round(tls_value, 1), "unit": unit, "floor": floor}
    if plain is not None:
        row.update(plain=round(plain, 1), ratio=round(tls_value / plain, 3))
    row.update(cpu or {})
    print(json.dumps(row), flush=True)


def process_cpu_s(pid: int) -> float:
    """CPU seconds of a process's live threads, counted in nanoseconds (/proc/PID/task/*/schedstat):
    a pass of 300,000 small messages costs the broker a few clock ticks, too coarse to compare."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def client_cpu_s() -> float:
    """This process's CPU seconds and its ended children's (kcat; the broker runs on)."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


class CpuPerMessage:
    """The broker's and the client's (this process's) CPU µs per message of each run, the
    pass with the best rate kept per (case, port): who pays for TLS, and which side bounds
    the rate (the machine is shared: CPU per message moves less with its load than rates)."""

    def __init__(self, broker_pid: int) -> None:
        self.pid = broker_pid
        self.best: dict[tuple[str, int], tuple[float, float, float]] = {}  # rate, broker µs, client µs

    def run(self, key: tuple[str, int], messages: int, work: Any) -> None:
        """Run ``work`` on an idle broker (what the case before left behind, the index
        builder catching up after a produce, neither slows it nor is charged to it); the
        broker's CPU counts until it is idle again."""
        kafka_bench.wait_idle(self.pid)
        broker, client = process_cpu_s(self.pid), client_cpu_s()
        seconds = work()
        client_used = client_cpu_s() - client
        kafka_bench.wait_idle(self.pid)
        rate = messages / seconds
        if rate > self.best.get(key, (0.0, 0.0, 0.0))[0]:
            self.best[key] = (rate, (process_cpu_s(self.pid) - broker) / messages * 1e6,
                              client_used / messages * 1e6)

    def rate(self, key: tuple[str, int]) -> float:
        return self.best[key][0]

    def fields(self, case: str, tls_port: int, plain_port: int) -> dict[str, float]:
        (_, tls_broker, tls_client), (_, plain_broker, plain_client) = self.best[(case, tls_port)], \
            self.best[(case, plain_port)]
        return {"broker_us_per_msg": round(tls_broker, 2), "plain_broker_us_per_msg": round(plain_broker, 2),
                "client_us_per_msg": round(tls_client, 2), "plain_client_us_per_msg": round(plain_client, 2)}


async def declare_queue(port: int) -> None:
    from pamqp import commands
    client = await amqp_bench.RawClient.connect(port)
    client.send(1, commands.Queue.Declare(queue=amqp_bench.QUEUE, durable=True))
    await client.expect(commands.Queue.DeclareOk)
    await client.close()


def handshakes(port: int, context: ssl.SSLContext, seconds: float) -> float:
    done, deadline = 0, time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                context.wrap_socket(raw, server_hostname="localhost"):
            done += 1
    return done / (time.perf_counter() - started)


def kcat_fetch(port: int, topic: str, messages: int, ca: str | None) -> float:
    """Seconds for kcat (librdkafka, C: OpenSSL on the socket, no memory BIO) to read ``topic``
    from the beginning to its end, over TLS when ``ca`` is given (one line per message)."""
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca}"] if ca else []
    started = time.perf_counter()
    out = subprocess.run(["kcat", "-C", "-b", f"127.0.0.1:{port}", "-t", topic, "-o", "beginning", "-e", "-q",
                          "-f", "\n", "-X", "fetch.max.bytes=52428800", *tls], capture_output=True, timeout=600)
    seconds = time.perf_counter() - started
    read = out.stdout.count(b"\n")
    if read != messages:
        raise RuntimeError(f"kcat read {read} of {messages} messages: {out.stderr[-300:]!r}")
    return seconds


@dataclasses.dataclass
class Broker:
    """One broker process with its four ports, and the code it runs ("current" or "baseline")."""

    code: str
    proc: subprocess.Popen
    kafka: int
    kafka_tls: int
    amqp: int
    amqp_tls: int
    cpu: CpuPerMessage | None = None


def start_broker(tmp: str, pki: Any, context: ssl.SSLContext, code: str, env: dict[str, str] | None) -> Broker:
    kafka, kafka_tls, amqp, amqp_tls = (free_port() for _ in range(4))
    TLS_PORTS.update({kafka_tls: context, amqp_tls: context})
    log = open(os.path.join(tmp, f"broker-{code}.log"), "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={tmp}/store-{code}",
         "--set", f"kafka.port={kafka}", "--set", f"kafka.tlsPort={kafka_tls}",
         "--set", f"amqp.port={amqp}", "--set", f"amqp.tlsPort={amqp_tls}", "--set", "stomp.enabled=false",
         "--set", "autoCreateTopicEnable=true", "--set", f"defaultTopicQueueNums={kafka_bench.PARTITIONS}",
         "--set", "mappedFileSizeCommitLog=268435456", "--set", f"listenPort={free_port()}",
         "--set", f"namesrv.port={free_port()}", "--set", "http.port=0",
         "--set", f"tls.server.certPath={pki.server_cert}", "--set", f"tls.server.keyPath={pki.server_key}"],
        stdout=subprocess.DEVNULL, stderr=log, env=env)
    log.close()
    broker = Broker(code, proc, kafka, kafka_tls, amqp, amqp_tls)
    for port in (kafka, kafka_tls, amqp, amqp_tls):
        wait_for_port(port, proc)
    broker.cpu = CpuPerMessage(proc.pid)
    return broker


def main() -> None:
    import uvloop  # the clients on uvloop too, as kafka_bench's: asyncio's pure-Python TLS would bound them
    run = uvloop.run
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--only", default="produce,fetch,publish,drain,kcat,handshakes",
                        help="comma-separated cases to run")
    parser.add_argument("--sizes", default="100,1024", help="comma-separated message sizes (100, 1024)")
    parser.add_argument("--baseline", help="a commit whose broker code runs beside this tree's, passes interleaved")
    args = parser.parse_args()
    only = set(args.only.split(","))
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(os.path.join(tmp, "pki"))
        context = ssl.create_default_context(cafile=pki.ca)
        brokers: list[Broker] = []
        try:
            brokers.append(start_broker(tmp, pki, context, "current", None))
            if args.baseline:
                env = kafka_bench.baseline_env(args.baseline, os.path.join(tmp, "baseline"))
                brokers.append(start_broker(tmp, pki, context, "baseline", env))
            print(json.dumps({"bench": "tls", "load": os.getloadavg()[0]}), flush=True)
            for size, floor in ((100, 0.5), (1024, 0.7)):
                if size not in sizes:
                    continue
                for n in range(args.passes):
                    for b in (brokers if n % 2 == 0 else brokers[::-1]):
                        cpu = b.cpu
                        assert cpu is not None
                        for port in ((b.kafka, b.kafka_tls) if n % 2 == 0 else (b.kafka_tls, b.kafka)):
                            if not only & {"produce", "fetch", "kcat"}:
                                break
                            topic = f"t{size}-{port}-{n}"
                            run(kafka_bench.create_topic(port, topic))
                            cpu.run(("produce", port), args.messages,
                                    lambda: run(kafka_bench.raw_produce(port, topic, size, args.messages)))
                            if "fetch" in only:
                                cpu.run(("fetch", port), args.messages,
                                        lambda: run(kafka_bench.raw_fetch(port, topic, args.messages)))
                        for port in ((b.amqp, b.amqp_tls) if n % 2 == 0 else (b.amqp_tls, b.amqp)):
                            if not only & {"publish", "drain"}:
                                break
                            run(declare_queue(port))
                            count = args.messages // 4
                            cpu.run(("publish", port), count, lambda: run(amqp_bench.raw_publish(port, count, size)))
                            cpu.run(("drain", port), count, lambda: run(amqp_bench.raw_drain(port, count)))
                if size == 1024 and "kcat" in only and shutil.which("kcat"):  # the broker's side when the client is not the bound
                    for n in range(args.passes):
                        for b in (brokers if n % 2 == 0 else brokers[::-1]):
                            topic = f"t{size}-{b.kafka}-0"  # written by the first pass
                            for port in ((b.kafka, b.kafka_tls) if n % 2 == 0 else (b.kafka_tls, b.kafka)):
                                b.cpu.run(("kcat", port), args.messages,  # type: ignore[union-attr]
                                          lambda: kcat_fetch(port, topic, args.messages,
                                                             pki.ca if port == b.kafka_tls else None))
                suffix = "100B" if size == 100 else "1KiB"
                for b in brokers:
                    cpu = b.cpu
                    assert cpu is not None
                    extra = {"code": b.code, "rev": args.baseline} if b.code == "baseline" else {}
                    for case, (plain_port, tls_port) in (
                            ("produce", (b.kafka, b.kafka_tls)), ("fetch", (b.kafka, b.kafka_tls)),
                            ("publish", (b.amqp, b.amqp_tls)), ("drain", (b.amqp, b.amqp_tls)),
                            ("kcat", (b.kafka, b.kafka_tls))):
                        if case not in only or (case, tls_port) not in cpu.best:
                            continue
                        name = {"publish": "amqp_raw_publish", "drain": "amqp_raw_drain",
                                "kcat": "kafka_kcat_fetch"}.get(case, f"kafka_raw_{case}") + f"_{suffix}"
                        emit(name, cpu.rate((case, tls_port)), cpu.rate((case, plain_port)), "msg/s", floor,
                             {**cpu.fields(case, tls_port, plain_port), **extra})
                    cpu.best.clear()
            if "handshakes" in only:
                emit("kafka_tls_handshakes", handshakes(brokers[0].kafka_tls, context, 3.0), None, "handshakes/s", None)
        finally:
            for b in brokers:
                b.proc.terminate()
                b.proc.wait(30)


if __name__ == "__main__":
    main()
