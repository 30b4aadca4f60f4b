"""10,000 held pulls through the facade: all of them held, all woken by one put per queue.

Their idle CPU and wake latency are measured by bench/long_poll_bench.py, not here."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from rocketport.common.message import Message
from rocketport.core.broker import Broker

HELD = 10_000
QUEUES = 10
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.mark.parametrize("loop_name", LOOPS)
def test_ten_thousand_held_pulls_are_all_woken_by_a_put(sem_config, loop_name):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            tasks = [asyncio.create_task(broker.pull("g", "T", i % QUEUES, 0, 32, hold_s=60))
                     for i in range(HELD)]
            for _ in range(5):
                await asyncio.sleep(0)
            assert len(broker.pull_waiters) >= HELD  # plus the idle schedule levels
            await asyncio.sleep(0.2)
            assert not any(t.done() for t in tasks)  # nothing stored: every pull still held
            for q in range(QUEUES):
                await broker.put_message(Message("T", b"x%d" % q, queue_id=q))
            done, pending = await asyncio.wait(tasks, timeout=20)
            assert not pending
            results = [t.result() for t in tasks]
            assert all(r.message_count == 1 for r in results)
            by_queue = {i % QUEUES: [m.body for m in r.messages()] for i, r in enumerate(results)}
            assert by_queue == {q: [b"x%d" % q] for q in range(QUEUES)}

    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        runner.run(main())
