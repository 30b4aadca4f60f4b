"""TLS against plaintext, side by side in one run: Kafka raw produce and fetch (100 B, 1 KiB),
AMQP raw publish with confirms (100 B, 1 KiB), and TLS handshakes a second.

Run: python bench/tls_bench.py [--messages N] [--passes P]
One broker subprocess (uvloop) serves each protocol on its plaintext port and on its
tlsPort, with a throwaway CA and an ECDSA P-256 server certificate (tests/tls/certs.py);
the bench's raw clients (bench/kafka_bench.py, bench/amqp_bench.py, on uvloop) are the same
on both ports, TLS added by the client's asyncio.open_connection. Plain and TLS passes alternate;
each row is the best pass: {"bench": "tls", "case": ..., "value": TLS msg/s, "plain": ...,
"ratio": TLS/plain, "floor": 0.5 (100 B) or 0.7 (1 KiB)}. handshakes_per_s: sequential
connect + TLS handshake + close from one client (TLS 1.3, no session resumption).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


def emit(case: str, tls_value: float, plain: float | None, unit: str, floor: float | None) -> None:
    row = {"bench": "tls", "case": case, "value": round(tls_value, 1), "unit": unit, "floor": floor}
    if plain is not None:
        row.update(plain=round(plain, 1), ratio=round(tls_value / plain, 3))
    print(json.dumps(row), flush=True)


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
            for size, floor in ((100, 0.5), (1024, 0.7)):
                best: dict[tuple[str, int], float] = {}
                for n in range(args.passes):
                    for port in ((kafka, kafka_tls) if n % 2 == 0 else (kafka_tls, kafka)):
                        topic = f"t{size}-{port}-{n}"
                        run(kafka_bench.create_topic(port, topic))
                        rate = args.messages / run(kafka_bench.raw_produce(port, topic, size, args.messages))
                        best[("produce", port)] = max(best.get(("produce", port), 0.0), rate)
                        rate = args.messages / run(kafka_bench.raw_fetch(port, topic, args.messages))
                        best[("fetch", port)] = max(best.get(("fetch", port), 0.0), rate)
                    for port in ((amqp, amqp_tls) if n % 2 == 0 else (amqp_tls, amqp)):
                        run(declare_queue(port))
                        count = args.messages // 4
                        rate = count / run(amqp_bench.raw_publish(port, count, size))
                        best[("publish", port)] = max(best.get(("publish", port), 0.0), rate)
                suffix = "100B" if size == 100 else "1KiB"
                emit(f"kafka_raw_produce_{suffix}", best[("produce", kafka_tls)], best[("produce", kafka)], "msg/s", floor)
                emit(f"kafka_raw_fetch_{suffix}", best[("fetch", kafka_tls)], best[("fetch", kafka)], "msg/s", floor)
                emit(f"amqp_raw_publish_{suffix}", best[("publish", amqp_tls)], best[("publish", amqp)], "msg/s", floor)
            emit("kafka_tls_handshakes", handshakes(kafka_tls, context, 3.0), None, "handshakes/s", None)
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()


if __name__ == "__main__":
    main()
