"""Long polling at scale: 10,000 held pulls through the Broker facade (in process).

    python bench/long_poll_bench.py [--held N]

Rows, per event loop (asyncio, uvloop): ``held_pulls_idle_cpu`` (the process's CPU share
while the pulls wait and nothing is stored: held pulls must cost nothing), and
``held_pulls_wake_max_ms`` (from the put of one message to the last of that queue's held
pulls returning, worst of ten queues). Ceilings: 5% idle, 50 ms wake. And
``notify_nobody_waiting`` (ns per dispatch notification of a queue nobody holds a pull on:
every stored message pays it; ceiling 2,000 ns). And ``one_queue_wake_ratio``: 10,000 pulls
held on one queue woken by one notify, against as many bare futures with their own timers
(the least a held pull needs from asyncio), best of six rounds each, alternating: a
per-waiter scan or quadratic clean-up would show as ~100x; ceiling 2x.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import tempfile
import time

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.core.consumer.long_polling import PullWaiters

QUEUES = 10


async def measure(root: str, held: int) -> tuple[float, float]:
    config = BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=1 << 20,
                          mapped_file_size_consume_queue=20 * 1024)
    async with Broker(config) as broker:
        broker.create_topic("T", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        await broker.put_message(Message("W", b"x", queue_id=0))  # warm the paths once
        await broker.pull("g", "W", 0, 0, 32)
        woke: dict[int, list[float]] = {q: [] for q in range(QUEUES)}

        async def pull(queue_id: int) -> None:
            await broker.pull("g", "T", queue_id, 0, 32, hold_s=60)
            woke[queue_id].append(time.perf_counter())

        tasks = [asyncio.create_task(pull(i % QUEUES)) for i in range(held)]
        for _ in range(5):
            await asyncio.sleep(0)
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.sleep(1.0)
        idle = (time.process_time() - cpu) / (time.perf_counter() - wall)
        worst = 0.0
        for q in range(QUEUES):
            put_at = time.perf_counter()
            await broker.put_message(Message("T", b"x", queue_id=q))
            deadline = time.monotonic() + 10
            while len(woke[q]) < held // QUEUES and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            worst = max(worst, max(woke[q], default=put_at + 10) - put_at)
        await asyncio.gather(*tasks)
        return idle, worst


def notify_cost_ns(calls: int = 200_000) -> float:
    waiters = PullWaiters()
    started = time.perf_counter()
    for i in range(calls):
        waiters.notify("T", i & 7, i)
    return (time.perf_counter() - started) / calls * 1e9


async def _wake_latency(waiters: PullWaiters | None, count: int) -> float:
    """Seconds from waking ``count`` holders of one queue until the last one has resumed
    (``waiters`` None: bare futures, each with its own hold timer)."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[bool]] = []
    last_wake = 0.0

    async def pull() -> None:
        nonlocal last_wake
        if waiters is None:
            future = loop.create_future()
            futures.append(future)
            timer = loop.call_later(30, future.cancel)
            try:
                await future
            finally:
                timer.cancel()
        else:
            await waiters.wait("T", 0, 0, timeout_s=30)
        last_wake = time.perf_counter()

    tasks = [asyncio.create_task(pull()) for _ in range(count)]
    for _ in range(3):
        await asyncio.sleep(0)
    notified = time.perf_counter()
    if waiters is None:
        for future in futures:
            future.set_result(True)
    else:
        waiters.notify("T", 0, 1)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    return last_wake - notified


async def wake_ratio(count: int) -> tuple[float, float]:
    ours: list[float] = []
    bare: list[float] = []
    for round_no in range(6):
        runs = [(ours, PullWaiters()), (bare, None)]
        for results, waiters in runs if round_no % 2 else runs[::-1]:
            results.append(await _wake_latency(waiters, count))
    return min(ours), min(bare)


def _row(case: str, value: float, unit: str, ceiling: float, **extra) -> None:
    print(json.dumps({"bench": "long_poll", "case": case, "value": round(value, 2), "unit": unit,
                      "ceiling": ceiling, "meets_ceiling": value <= ceiling, **extra}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=10_000)
    args = parser.parse_args()
    loops = {"asyncio": asyncio.new_event_loop}
    try:
        import uvloop
        loops["uvloop"] = uvloop.new_event_loop
    except ImportError:
        pass
    for name, factory in loops.items():
        root = tempfile.mkdtemp(prefix="long-poll-bench-")
        gc.collect()
        gc.freeze()  # as the broker does after start-up: a full pass is not the pulls' cost
        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                idle, worst = runner.run(measure(root, args.held))
                ours, bare = runner.run(wake_ratio(args.held))
        finally:
            gc.unfreeze()
            shutil.rmtree(root, ignore_errors=True)
        _row(f"held_pulls_idle_cpu_{name}", idle * 100, "%", 5, held=args.held)
        _row(f"held_pulls_wake_max_ms_{name}", worst * 1000, "ms", 50, held=args.held)
        _row(f"one_queue_wake_ratio_{name}", ours / bare, "x", 2, held=args.held,
             ms=round(ours * 1000, 1), bare_futures_ms=round(bare * 1000, 1))
    _row("notify_nobody_waiting", notify_cost_ns(), "ns", 2000)


if __name__ == "__main__":
    main()
