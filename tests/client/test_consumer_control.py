"""PushConsumer against a live broker: a reset the broker pushes (resetOffsetByTime on a
live group), consumeTimeout, PULL_MAX_IDLE and the pool of concurrent listener calls."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter

import pytest

from rocketport.client import AdminClient, ConsumeResult, Message, Producer, PushConsumer
from tests.support.aio import run

from .test_push_consumer import wait_for


async def one_queue_topic(namesrv: str, topic: str) -> object:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, queue_nums=1)
        [queue] = await admin.queues(topic)
    return queue


async def send_all(namesrv: str, topic: str, bodies: list[bytes]) -> None:
    async with Producer(namesrv, "PG") as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


async def committed(namesrv: str, group: str, queue) -> int:
    async with AdminClient(namesrv) as admin:
        return await admin.committed_offset(group, queue)


async def until_committed(namesrv: str, group: str, queue, offset: int) -> None:
    async with AdminClient(namesrv) as admin:
        deadline = time.monotonic() + 20
        while await admin.committed_offset(group, queue) != offset:
            assert time.monotonic() < deadline, "offset never committed"
            await asyncio.sleep(0.05)


async def reset_with_cli(namesrv: str, group: str, topic: str, timestamp_ms: int) -> None:
    """`rocketport admin resetOffsetByTime`, as an operator runs it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocketport", "admin", "resetOffsetByTime", "-n", namesrv,
        "-g", group, "-t", topic, "-s", str(timestamp_ms),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out + err


@pytest.mark.parametrize("orderly, via", [(False, "AdminClient"), (True, "AdminClient"),
                                          (False, "cli")])
def test_reset_by_time_rewinds_a_live_consumer(broker, orderly, via):
    """resetOffsetByTime on a live group: the broker pushes RESET_CONSUMER_CLIENT_OFFSET,
    the consumer drops what it holds, commits the reset offset (not its old position) and
    receives again from there; the committed offset then ends at the end."""
    async def main():
        queue = await one_queue_topic(broker.namesrv, "Rewind")
        first = [b"old%d" % i for i in range(5)]
        second = [b"new%d" % i for i in range(5)]
        await send_all(broker.namesrv, "Rewind", first)
        reset_ms = int(time.time() * 1000) + 1  # after every "old" message was stored
        while int(time.time() * 1000) < reset_ms:
            await asyncio.sleep(0.001)
        await send_all(broker.namesrv, "Rewind", second)

        got: list[bytes] = []
        redelivered = asyncio.Event()
        gate = asyncio.Event()

        async def listener(msgs):
            for msg in msgs:
                got.append(msg.body)
                if msg.body == b"new0" and got.count(b"new0") == 2:
                    redelivered.set()
                    await gate.wait()  # holds the queue's lowest unfinished offset at 5
            return ConsumeResult.SUCCESS

        c = PushConsumer("RewindGroup", broker.namesrv, consume_from="first",
                         persist_interval_s=0.1, orderly=orderly)
        c.subscribe("Rewind")
        c.register(listener)
        await c.start()
        await wait_for(lambda: len(got) == 10)
        await until_committed(broker.namesrv, "RewindGroup", queue, 10)

        if via == "cli":
            await reset_with_cli(broker.namesrv, "RewindGroup", "Rewind", reset_ms)
        else:
            async with AdminClient(broker.namesrv) as admin:
                await admin.reset_offset_by_time("RewindGroup", "Rewind", reset_ms / 1000)
        await asyncio.wait_for(redelivered.wait(), 20)
        # the consumer committed the reset point, not its old position 10, over the reset
        assert await committed(broker.namesrv, "RewindGroup", queue) == 5
        assert c.process_queue_info(queue).commit_offset == 5
        gate.set()
        await until_committed(broker.namesrv, "RewindGroup", queue, 10)
        await c.shutdown()
        counts = Counter(got)
        assert {b: counts[b] for b in first} == {b: 1 for b in first}
        assert {b: counts[b] for b in second} == {b: 2 for b in second}
        assert await committed(broker.namesrv, "RewindGroup", queue) == 10
    run(asyncio.wait_for(main(), 120))


def test_reset_of_another_group_or_topic_is_ignored(broker):
    """A reset names a group and a topic: a consumer of another group goes on as before."""
    async def main():
        queue = await one_queue_topic(broker.namesrv, "Keep")
        await send_all(broker.namesrv, "Keep", [b"k%d" % i for i in range(4)])
        got: list[bytes] = []

        async def listener(msgs):
            got.extend(m.body for m in msgs)
            return ConsumeResult.SUCCESS

        c = PushConsumer("KeepGroup", broker.namesrv, consume_from="first", persist_interval_s=0.1)
        c.subscribe("Keep")
        c.register(listener)
        await c.start()
        await wait_for(lambda: len(got) == 4)
        await until_committed(broker.namesrv, "KeepGroup", queue, 4)
        async with AdminClient(broker.namesrv) as admin:
            await admin.reset_offset_by_time("OtherGroup", "Keep", 0)
            assert await admin.committed_offset("OtherGroup", queue) == 0
        await send_all(broker.namesrv, "Keep", [b"after"])
        await wait_for(lambda: len(got) == 5)
        await c.shutdown()
        assert got == [b"k0", b"k1", b"k2", b"k3", b"after"]
        assert await committed(broker.namesrv, "KeepGroup", queue) == 5
    run(asyncio.wait_for(main(), 120))


def test_consume_timeout_sends_a_stuck_message_back(broker):
    """A listener call running past consume_timeout_s: its message is sent back (delay
    level 3) and redelivered from the retry topic, and the queue's offset moves past it
    while the stuck call still runs."""
    async def main():
        queue = await one_queue_topic(broker.namesrv, "Stuck")
        await send_all(broker.namesrv, "Stuck", [b"slow", b"m1", b"m2"])
        deliveries: list[tuple[bytes, int, str]] = []
        retried = asyncio.Event()
        release = asyncio.Event()

        async def listener(msgs):
            for msg in msgs:
                deliveries.append((msg.body, msg.reconsume_times, msg.topic))
                if msg.body == b"slow":
                    if msg.reconsume_times == 0:
                        await release.wait()
                    else:
                        retried.set()
            return ConsumeResult.SUCCESS

        c = PushConsumer("StuckGroup", broker.namesrv, consume_from="first",
                         consume_timeout_s=0.5, persist_interval_s=0.1)
        c.subscribe("Stuck")
        c.register(listener)
        await c.start()
        await asyncio.wait_for(retried.wait(), 30)
        info = c.process_queue_info(queue)
        assert info.commit_offset == 3  # the stuck call no longer holds the offset
        assert info.cached_msg_count == 0
        await until_committed(broker.namesrv, "StuckGroup", queue, 3)
        release.set()
        await c.shutdown()
        assert sorted(deliveries) == [(b"m1", 0, "Stuck"), (b"m2", 0, "Stuck"),
                                      (b"slow", 0, "Stuck"), (b"slow", 1, "Stuck")]
        assert await committed(broker.namesrv, "StuckGroup", queue) == 3
    run(asyncio.wait_for(main(), 120))


def test_pull_max_idle_drops_a_queue_not_pulled_and_takes_it_again(broker):
    """On the consumer's clock: a queue whose last pull is older than pull_max_idle_s is
    dropped at the rebalance (its offset committed) and taken again with a new pull; a
    queue held back by flow control is not idle. No message is lost or doubled."""
    async def main():
        queue = await one_queue_topic(broker.namesrv, "Idle")
        await send_all(broker.namesrv, "Idle", [b"a0", b"a1"])
        now = [1000.0]
        got: list[bytes] = []
        gate = asyncio.Event()
        gate.set()

        async def listener(msgs):
            got.extend(m.body for m in msgs)
            await gate.wait()
            return ConsumeResult.SUCCESS

        c = PushConsumer("IdleGroup", broker.namesrv, consume_from="first", clock=lambda: now[0],
                         pull_threshold_for_queue=2, pull_batch_size=2, consume_thread_max=2)
        c.subscribe("Idle")
        c.register(listener)
        await c.start()
        await wait_for(lambda: len(got) == 2)
        await wait_for(lambda: c.process_queue_info(queue).cached_msg_count == 0)
        # the next pull is held by the broker (nothing new): on the clock, never answered
        assert c.process_queue_info(queue).last_pull_timestamp == 1000.0
        now[0] += 121
        await c.rebalance()
        assert queue in c.assigned
        assert c.process_queue_info(queue).last_pull_timestamp == 1121.0  # a new pull
        assert await committed(broker.namesrv, "IdleGroup", queue) == 2  # dropped: committed

        # held back by flow control (two messages in listener calls): not idle
        gate.clear()
        await send_all(broker.namesrv, "Idle", [b"b0", b"b1"])
        await wait_for(lambda: len(got) == 4)
        await wait_for(lambda: c.process_queue_info(queue).cached_msg_count == 2)
        paused = c.process_queue_info(queue).last_pull_timestamp
        now[0] += 121
        await c.rebalance()
        assert c.process_queue_info(queue).last_pull_timestamp == paused  # same queue work
        gate.set()
        await send_all(broker.namesrv, "Idle", [b"c0"])
        await wait_for(lambda: len(got) == 5)
        await c.shutdown()
        assert sorted(got) == [b"a0", b"a1", b"b0", b"b1", b"c0"]
        assert await committed(broker.namesrv, "IdleGroup", queue) == 5
    run(asyncio.wait_for(main(), 120))


def test_a_pool_of_listener_calls_commits_the_lowest_unfinished_offset(broker):
    """consume_thread_max listener calls at once on one queue, finishing in any order; the
    offset committed is the lowest message not finished."""
    async def main():
        queue = await one_queue_topic(broker.namesrv, "Pool")
        await send_all(broker.namesrv, "Pool", [b"%d" % i for i in range(8)])
        release = {i: asyncio.Event() for i in range(8)}
        started: list[int] = []
        running = [0, 0]  # now, most at once

        async def listener(msgs):
            [msg] = msgs
            running[0] += 1
            running[1] = max(running)
            started.append(msg.queue_offset)
            try:
                await release[msg.queue_offset].wait()
            finally:
                running[0] -= 1
            return ConsumeResult.SUCCESS

        c = PushConsumer("PoolGroup", broker.namesrv, consume_from="first", consume_thread_max=4,
                         persist_interval_s=0.1)
        c.subscribe("Pool")
        c.register(listener)
        await c.start()
        await wait_for(lambda: len(started) == 4)
        assert sorted(started) == [0, 1, 2, 3]
        for i in (1, 2, 3):  # the later ones finish first
            release[i].set()
        await wait_for(lambda: len(started) == 7)
        info = c.process_queue_info(queue)
        assert info.commit_offset == 0  # offset 0 is still being consumed
        assert info.consuming_msg_count == 4 and info.cached_msg_count == 5
        release[0].set()
        await wait_for(lambda: c.process_queue_info(queue).commit_offset == 4)
        await until_committed(broker.namesrv, "PoolGroup", queue, 4)
        for event in release.values():
            event.set()
        await wait_for(lambda: c.process_queue_info(queue).commit_offset == 8)
        await c.shutdown()
        assert running[1] == 4
        assert sorted(started) == list(range(8))
        assert await committed(broker.namesrv, "PoolGroup", queue) == 8
    run(asyncio.wait_for(main(), 120))
