"""10,000 held pulls through the facade: no CPU while idle, all woken fast by a put."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
import uvloop

from rocketport.core.broker import Broker
from rocketport.core.message import Message

HELD = 10_000
QUEUES = 10
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture
def frozen_heap():
    """Keep the collector out of the timing: earlier tests' objects are frozen (as a broker
    does with gc.freeze() after start-up) and collection is paused while the 10,000 held
    pulls exist, since a full pass over them on a loaded machine costs tens of ms that
    would be charged to whichever wake it interrupted. Nothing here is cyclic garbage."""
    gc.collect()
    gc.freeze()
    gc.disable()
    yield
    gc.enable()
    gc.unfreeze()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_ten_thousand_held_pulls_idle_and_wake(sem_config, frozen_heap, loop_name):
    # the broker's own periodic services at their default pace: what is measured is the pulls
    config = sem_config.with_overrides(
        flush_interval_commit_log=500, flush_interval_consume_queue=1000,
        flush_delay_offset_interval=10_000, transaction_check_interval=60_000)

    async def main():
        async with Broker(config) as broker:
            broker.create_topic("T", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            # warm the put and pull paths once, so the first queue measures the steady state
            await broker.put_message(Message("W", b"x", queue_id=0))
            assert (await broker.pull("g", "W", 0, 0, 32)).message_count == 1
            woke: dict[int, list[float]] = {q: [] for q in range(QUEUES)}

            async def pull(queue_id: int) -> int:
                r = await broker.pull("g", "T", queue_id, 0, 32, hold_s=60)
                woke[queue_id].append(time.perf_counter())
                return r.message_count

            tasks = [asyncio.create_task(pull(i % QUEUES)) for i in range(HELD)]
            for _ in range(5):
                await asyncio.sleep(0)
            assert len(broker.pull_waiters) >= HELD  # plus the idle schedule levels

            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.sleep(1.0)
            idle = (time.process_time() - cpu) / (time.perf_counter() - wall)

            latencies = []
            for q in range(QUEUES):
                put_at = time.perf_counter()
                await broker.put_message(Message("T", b"x", queue_id=q))
                deadline = time.monotonic() + 2
                while len(woke[q]) < HELD // QUEUES and time.monotonic() < deadline:
                    await asyncio.sleep(0.001)
                assert len(woke[q]) == HELD // QUEUES
                latencies.append(max(woke[q]) - put_at)
            assert sum(await asyncio.gather(*tasks)) == HELD
            return idle, latencies

    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        idle, latencies = runner.run(main())
    print(f"{loop_name}: idle CPU {idle:.2%}; wake ms " + ", ".join(f"{x * 1000:.1f}" for x in latencies))
    assert idle < 0.05
    assert max(latencies) < 0.050
