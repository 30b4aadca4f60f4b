"""PullWaiters: wake on notify, time out, clean up, and cost nothing while idle."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
import uvloop

from rocketport.core.consumer.long_polling import PullWaiters

IDLE_WAITERS = 10_000


# The broker runs on uvloop where installed and on asyncio's own loop elsewhere.
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def run(coro, loop_factory=asyncio.new_event_loop):
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(coro)


@pytest.fixture
def frozen_heap():
    """Move objects left by earlier tests out of the collector's reach for a timing test.

    A full (generation 2) collection walks every live object; with the suite's leftovers
    it pauses the loop for ~100 ms on a slow core, which would be charged to whatever
    notify happened to run. A broker does the same with gc.freeze() after start-up.
    """
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


async def _settle() -> None:
    """Let freshly created tasks reach their first await."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_notify_above_offset_wakes_with_true():
    async def main():
        waiters = PullWaiters()
        task = asyncio.create_task(waiters.wait("T", 0, 5, timeout_s=10))
        await _settle()
        assert len(waiters) == 1
        waiters.notify("T", 0, 6)
        assert await asyncio.wait_for(task, 1) is True
        assert len(waiters) == 0 and waiters.queue_count == 0

    run(main())


def test_notify_not_beyond_offset_keeps_waiting():
    async def main():
        waiters = PullWaiters()
        task = asyncio.create_task(waiters.wait("T", 0, 5, timeout_s=10))
        await _settle()
        waiters.notify("T", 0, 5)  # max offset 5 means offsets 0..4 exist: nothing new
        await _settle()
        assert not task.done()
        waiters.notify("T", 0, 7)
        assert await asyncio.wait_for(task, 1) is True

    run(main())


def test_other_queues_and_topics_are_not_woken():
    async def main():
        waiters = PullWaiters()
        target = asyncio.create_task(waiters.wait("T", 1, 0, timeout_s=10))
        other_queue = asyncio.create_task(waiters.wait("T", 2, 0, timeout_s=10))
        other_topic = asyncio.create_task(waiters.wait("U", 1, 0, timeout_s=10))
        await _settle()
        waiters.notify("T", 1, 1)
        assert await asyncio.wait_for(target, 1) is True
        await _settle()
        assert not other_queue.done() and not other_topic.done()
        assert len(waiters) == 2
        waiters.wake_all()
        assert await asyncio.wait_for(asyncio.gather(other_queue, other_topic), 1) == [False, False]

    run(main())


def test_only_waiters_below_max_offset_wake():
    async def main():
        waiters = PullWaiters()
        low = asyncio.create_task(waiters.wait("T", 0, 3, timeout_s=10))
        high = asyncio.create_task(waiters.wait("T", 0, 9, timeout_s=10))
        await _settle()
        waiters.notify("T", 0, 4)
        assert await asyncio.wait_for(low, 1) is True
        await _settle()
        assert not high.done() and len(waiters) == 1
        waiters.notify("T", 0, 10)
        assert await asyncio.wait_for(high, 1) is True

    run(main())


def test_wait_any_wakes_on_the_first_queue_to_grow_and_leaves_no_entries():
    async def main():
        waiters = PullWaiters()
        positions = [("T", 0, 5), ("T", 1, 7), ("U", 0, 0)]
        task = asyncio.create_task(waiters.wait_any(positions, timeout_s=10))
        await _settle()
        assert len(waiters) == 3 and waiters.queue_count == 3
        waiters.notify("T", 1, 7)  # not beyond its offset: keeps waiting
        await _settle()
        assert not task.done()
        waiters.notify("U", 0, 1)
        assert await asyncio.wait_for(task, 1) is True
        assert len(waiters) == 0 and waiters.queue_count == 0
        waiters.notify("T", 0, 6)  # the other registrations are gone: nothing to wake

    run(main())


def test_wait_any_times_out_and_cancels_cleanly():
    async def main():
        waiters = PullWaiters()
        assert await waiters.wait_any([("T", 0, 0), ("T", 1, 0)], timeout_s=0.05) is False
        assert len(waiters) == 0 and waiters.queue_count == 0
        task = asyncio.create_task(waiters.wait_any([("T", 0, 0), ("T", 1, 0)], timeout_s=60))
        await _settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(waiters) == 0 and waiters.queue_count == 0

    run(main())


def test_timeout_returns_false_and_cleans_up():
    async def main():
        waiters = PullWaiters()
        started = time.monotonic()
        assert await waiters.wait("T", 0, 0, timeout_s=0.05) is False
        assert 0.04 <= time.monotonic() - started < 1.0
        assert len(waiters) == 0 and waiters.queue_count == 0

    run(main())


def test_non_positive_timeout_returns_false_at_once():
    async def main():
        waiters = PullWaiters()
        assert await waiters.wait("T", 0, 0, timeout_s=0) is False
        assert len(waiters) == 0

    run(main())


def test_cancellation_leaves_no_entries_and_no_timers():
    async def main():
        waiters = PullWaiters()
        loop = asyncio.get_running_loop()
        tasks = [asyncio.create_task(waiters.wait("T", i % 4, 0, timeout_s=60)) for i in range(100)]
        await _settle()
        assert len(waiters) == 100 and waiters.queue_count == 4
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        assert len(waiters) == 0 and waiters.queue_count == 0
        # Every hold timer was cancelled: asyncio drops cancelled handles from its heap.
        live_timers = [h for h in loop._scheduled if not h.cancelled()]  # noqa: SLF001
        assert live_timers == []
        waiters.notify("T", 0, 1)  # nothing left to wake, must not fail

    run(main())


def test_notify_all_ends_only_that_topic():
    async def main():
        waiters = PullWaiters()
        on_t = [asyncio.create_task(waiters.wait("T", q, 0, timeout_s=10)) for q in range(3)]
        on_u = asyncio.create_task(waiters.wait("U", 0, 0, timeout_s=10))
        await _settle()
        waiters.notify_all("T")
        assert await asyncio.wait_for(asyncio.gather(*on_t), 1) == [False] * 3
        await _settle()
        assert not on_u.done() and len(waiters) == 1
        waiters.wake_all()
        assert await asyncio.wait_for(on_u, 1) is False

    run(main())


def test_close_wakes_everyone_and_refuses_new_holds():
    async def main():
        waiters = PullWaiters()
        held = asyncio.create_task(waiters.wait("T", 0, 0, timeout_s=60))
        await _settle()
        waiters.close()
        assert await asyncio.wait_for(held, 1) is False
        started = time.monotonic()
        assert await waiters.wait("T", 0, 0, timeout_s=60) is False
        assert time.monotonic() - started < 0.5
        assert len(waiters) == 0

    run(main())


@pytest.mark.parametrize("loop_name", LOOPS)
def test_ten_thousand_idle_waiters_each_woken_by_its_queue_only(loop_name, frozen_heap):
    """10,000 held pulls over 10 queues: a notify wakes all 1,000 holders of its queue and
    nobody else (their idle CPU and wake latency: bench/long_poll_bench.py)."""
    queues = 10

    async def main():
        waiters = PullWaiters()
        woke_at: list[float] = []

        async def pull(queue_id: int) -> bool:
            result = await waiters.wait("T", queue_id, 100, timeout_s=30)
            woke_at.append(time.perf_counter())
            return result

        tasks = [asyncio.create_task(pull(i % queues)) for i in range(IDLE_WAITERS)]
        await _settle()
        assert len(waiters) == IDLE_WAITERS

        for queue_id in range(queues):
            woke_at.clear()
            waiters.notify("T", queue_id, 101)
            await asyncio.sleep(0)
            deadline = time.monotonic() + 1.0
            while len(woke_at) < IDLE_WAITERS // queues and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            assert len(woke_at) == IDLE_WAITERS // queues
            # The queues not yet notified are all still held.
            assert len(waiters) == IDLE_WAITERS // queues * (queues - queue_id - 1)
        assert all(await asyncio.gather(*tasks))

    run(main(), LOOPS[loop_name])
