"""Native client (rocketport.client) throughput against a local broker, rocketmq 0.4.4 as peer.

The broker runs in its own process (uvloop, ASYNC_FLUSH, a temporary store, remoting and
name-server listeners on free ports); the native client runs in this process on uvloop;
the PyPI `rocketmq` 0.4.4 client (C++ RocketMQ client 1.x) runs in a subprocess through
interop/rocketmq_py/client.py --quiet, against the same broker in the same run.
Prints one JSON object per case:
    python bench/client_bench.py [--quick] [--dir DIR]
Cases (100-byte bodies):
- send_single_100B: one send at a time, each awaited before the next (peer: send_sync);
- send_batch100_100B: send_batch of 100 messages, 8 batches in flight (peer: send_batch
  of 100, one at a time, the C++ client's synchronous API; it zlib-compresses each batch
  body, over 4 KiB, which the broker inflates);
- push_consume_100B: a PushConsumer (clustering, pulls of 32, listener given batches of 32)
  reads a preloaded topic from the first offset; timed from start() to the last message
  (peer: its PushConsumer, same topic, own group, same timing).
Floors: batched send and push consume 150,000 msg/s; single send: the peer's figure.
Each row also gives the native client's CPU per message (this process's CPU time over the
case / messages): on a loaded machine throughput falls, CPU per message much less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketport.client import ConsumeResult, Message, Producer, PushConsumer
from procs import free_port as _free_port, remoting_broker_main

PEER_CLIENT = Path(__file__).resolve().parents[1] / "interop" / "rocketmq_py" / "client.py"
BODY = b"x" * 100
FLOORS = {"send_batch100_100B": 150_000, "push_consume_100B": 150_000}


def _run_loop(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _peer(home: str, *args: str, timeout: float = 600) -> dict | None:
    """Run the rocketmq 0.4.4 adapter; its summary line, or None when it is unavailable."""
    try:
        import rocketmq.client  # noqa: F401
    except ImportError:
        return None
    proc = subprocess.run([sys.executable, str(PEER_CLIENT), *args, "--quiet"], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, HOME=home))
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"peer {args[0]} failed: {proc.stderr[-500:]}", file=sys.stderr)
        return None
    return lines[-1]


def _row(case: str, measured: tuple[float, float], peer: dict | None,
         floor: float | None = None) -> dict:
    """`measured`: (msg/s, the client process's CPU µs per message)."""
    value, cpu_us = measured
    peer_value = round(peer["messages"] / peer["seconds"]) if peer else None
    return {"bench": "client", "case": case, "value": round(value), "unit": "msg/s",
            "floor": floor if floor is not None else peer_value,
            "peer": "rocketmq-0.4.4 (PyPI, C++ 1.x)", "peer_value": peer_value,
            "client_cpu_us_per_msg": round(cpu_us, 2)}


async def _send_single(namesrv: str, topic: str, seconds: float) -> float:
    async with Producer(namesrv, "BenchSingle") as producer:
        await producer.send(Message(topic, BODY))  # routes and connection warm
        count, start, cpu = 0, time.perf_counter(), time.process_time()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                await producer.send(Message(topic, BODY))
            count += 100
        return count / (time.perf_counter() - start), (time.process_time() - cpu) / count * 1e6


async def _send_batches(namesrv: str, topic: str, total: int, window: int = 8) -> float:
    async with Producer(namesrv, "BenchBatch") as producer:
        batch = [Message(topic, BODY) for _ in range(100)]
        await producer.send_batch(batch)
        batches = total // 100
        start, cpu = time.perf_counter(), time.process_time()
        sent = 0

        async def lane() -> None:
            nonlocal sent
            while sent < batches:
                sent += 1
                await producer.send_batch(batch)

        await asyncio.gather(*(lane() for _ in range(window)))
        return (batches * 100 / (time.perf_counter() - start),
                (time.process_time() - cpu) / (batches * 100) * 1e6)


async def _push_consume(namesrv: str, topic: str, total: int) -> float:
    done = asyncio.Event()
    received = 0

    async def listener(msgs) -> ConsumeResult:
        nonlocal received
        received += len(msgs)
        if received >= total:
            done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("BenchPushNative", namesrv, consume_from="first",
                            pull_batch_size=32, consume_batch_size=32)
    consumer.subscribe(topic)
    consumer.register(listener)
    start, cpu = time.perf_counter(), time.process_time()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 600)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await consumer.shutdown()
    return received / elapsed, cpu / received * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (CI smoke)")
    parser.add_argument("--dir", help="store directory parent (default: a temp dir)")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else 5.0
    batch_total = 100_000 if args.quick else 500_000
    consume_total = 100_000 if args.quick else 500_000
    single_peer_n = "2000" if args.quick else "10000"
    store_dir = tempfile.mkdtemp(prefix="client-bench-", dir=args.dir)
    home = os.path.join(store_dir, "home")  # the C++ client logs under $HOME/logs
    os.makedirs(home)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    broker = ctx.Process(target=remoting_broker_main, args=(os.path.join(store_dir, "store"), _free_port(), child))
    broker.start()
    try:
        namesrv = parent.recv()
        single = _run_loop(_send_single(namesrv, "BenchSingle", seconds))
        peer = _peer(home, "produce", namesrv, "BenchSinglePeer", single_peer_n, "--mode", "sync",
                     "--body-size", "100")
        print(json.dumps(_row("send_single_100B", single, peer)), flush=True)

        batched = _run_loop(_send_batches(namesrv, "BenchConsume", batch_total))
        peer = _peer(home, "produce", namesrv, "BenchSinglePeer", str(batch_total // 5), "--mode", "batch",
                     "--body-size", "100", "--batch-size", "100")
        print(json.dumps(_row("send_batch100_100B", batched, peer, FLOORS["send_batch100_100B"])), flush=True)

        # the topic the batch case filled (batch_total messages) is read by both consumers
        consumed = _run_loop(_push_consume(namesrv, "BenchConsume", min(consume_total, batch_total)))
        peer = _peer(home, "push", namesrv, "BenchConsume", "BenchPushPeer",
                     str(min(consume_total, batch_total)), "--timeout", "300", "--linger", "0")
        print(json.dumps(_row("push_consume_100B", consumed, peer, FLOORS["push_consume_100B"])), flush=True)
    finally:
        parent.send("stop")
        broker.join(60)
        if broker.is_alive():
            broker.terminate()
        shutil.rmtree(store_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
