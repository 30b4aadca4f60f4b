"""TLS against plaintext, side by side in one run: Kafka raw produce and fetch (100 B, 1 KiB),
AMQP raw publish with confirms and drain (100 B, 1 KiB), and TLS handshakes a second.

Run: python bench/tls_bench.py [--messages N] [--passes P]
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
"""

from __future__ import annotations

import argparse
import asyncio
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
         cpu: dict[str, float] | None = None) -> None:
    row = {"bench": "tls", "case": case, "value": round(tls_value, 1), "unit": unit, "floor": floor}
    if plain is not None:
        row.update(plain=round(plain, 1), ratio=round(tls_value / plain, 3))
    row.update(cpu or {})
    print(json.dumps(row), flush=True)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
        broker, client = process_cpu_s(self.pid), client_cpu_s()
        seconds = work()
        rate = messages / seconds
        if rate > self.best.get(key, (0.0, 0.0, 0.0))[0]:
            self.best[key] = (rate, (process_cpu_s(self.pid) - broker) / messages * 1e6,
                              (client_cpu_s() - client) / messages * 1e6)

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


def main() -> None:
    import uvloop  # the clients on uvloop too, as kafka_bench's: asyncio's pure-Python TLS would bound them
    run = uvloop.run
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(os.path.join(tmp, "pki"))
        context = ssl.create_default_context(cafile=pki.ca)
        kafka, kafka_tls, amqp, amqp_tls = (free_port() for _ in range(4))
        TLS_PORTS.update({kafka_tls: context, amqp_tls: context})
        log = open(os.path.join(tmp, "broker.log"), "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={tmp}/store",
             "--set", f"kafka.port={kafka}", "--set", f"kafka.tlsPort={kafka_tls}",
             "--set", f"amqp.port={amqp}", "--set", f"amqp.tlsPort={amqp_tls}", "--set", "stomp.enabled=false",
             "--set", "autoCreateTopicEnable=true", "--set", f"defaultTopicQueueNums={kafka_bench.PARTITIONS}",
             "--set", "mappedFileSizeCommitLog=268435456", "--set", f"listenPort={free_port()}",
             "--set", f"namesrv.port={free_port()}", "--set", "http.port=0",
             "--set", f"tls.server.certPath={pki.server_cert}", "--set", f"tls.server.keyPath={pki.server_key}"],
            stdout=subprocess.DEVNULL, stderr=log)
        try:
            for port in (kafka, kafka_tls, amqp, amqp_tls):
                wait_for_port(port, proc)
            print(json.dumps({"bench": "tls", "load": os.getloadavg()[0]}), flush=True)
            cpu = CpuPerMessage(proc.pid)
            for size, floor in ((100, 0.5), (1024, 0.7)):
                for n in range(args.passes):
                    for port in ((kafka, kafka_tls) if n % 2 == 0 else (kafka_tls, kafka)):
                        topic = f"t{size}-{port}-{n}"
                        run(kafka_bench.create_topic(port, topic))
                        cpu.run(("produce", port), args.messages,
                                lambda: run(kafka_bench.raw_produce(port, topic, size, args.messages)))
                        cpu.run(("fetch", port), args.messages, lambda: run(kafka_bench.raw_fetch(port, topic, args.messages)))
                    for port in ((amqp, amqp_tls) if n % 2 == 0 else (amqp_tls, amqp)):
                        run(declare_queue(port))
                        count = args.messages // 4
                        cpu.run(("publish", port), count, lambda: run(amqp_bench.raw_publish(port, count, size)))
                        cpu.run(("drain", port), count, lambda: run(amqp_bench.raw_drain(port, count)))
                suffix = "100B" if size == 100 else "1KiB"
                for case, (plain_port, tls_port) in (("produce", (kafka, kafka_tls)), ("fetch", (kafka, kafka_tls)),
                                                     ("publish", (amqp, amqp_tls)), ("drain", (amqp, amqp_tls))):
                    name = f"{'amqp' if case in ('publish', 'drain') else 'kafka'}_raw_{case}_{suffix}"
                    emit(name, cpu.rate((case, tls_port)), cpu.rate((case, plain_port)), "msg/s", floor,
                         cpu.fields(case, tls_port, plain_port))
                if size == 1024 and shutil.which("kcat"):  # the broker's side when the client is not the bound
                    topic = f"t{size}-{kafka}-0"  # written by the first pass
                    for n in range(args.passes):
                        for port in ((kafka, kafka_tls) if n % 2 == 0 else (kafka_tls, kafka)):
                            cpu.run(("kcat", port), args.messages,
                                    lambda: kcat_fetch(port, topic, args.messages, pki.ca if port == kafka_tls else None))
                    emit("kafka_kcat_fetch_1KiB", cpu.rate(("kcat", kafka_tls)), cpu.rate(("kcat", kafka)), "msg/s",
                         floor, cpu.fields("kcat", kafka_tls, kafka))
                cpu.best.clear()
            emit("kafka_tls_handshakes", handshakes(kafka_tls, context, 3.0), None, "handshakes/s", None)
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()


if __name__ == "__main__":
    main()
