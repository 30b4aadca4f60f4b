"""Delay levels and delivery times through the facade (levels "1s 2s 3s" here)."""

from __future__ import annotations

import asyncio
import json
import os
import time

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.schedule import SCHEDULE_TOPIC
from tests.support.aio import run
from tests.support.fake_time import FakeTime


def ms() -> int:
    return time.time_ns() // 1_000_000


async def _until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def _take(broker: Broker, topic: str, queue_id: int, want: int, timeout_s: float):
    """Long-poll the real queue until ``want`` messages arrived; returns them with arrival ms."""
    got = []
    offset = 0
    deadline = time.monotonic() + timeout_s
    while len(got) < want:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(got)} of {want} delivered"
        r = await broker.pull("g", topic, queue_id, offset, 64, hold_s=left)
        now = ms()
        got += [(m, now) for m in r.messages()]
        offset = r.next_begin_offset
    return got


async def _next(broker: Broker, topic: str, queue_id: int, offset: int) -> list:
    """The messages from ``offset`` on, once there are some: a pull held until one arrives
    (with fake timers a hold ends only by an arrival; bounded here in real time)."""
    async def pull() -> list:
        while not (r := await broker.pull("g", topic, queue_id, offset, 64, hold_s=3600)).messages():
            pass
        return r.messages()
    return await asyncio.wait_for(pull(), 30)


def test_delay_level_delivers_when_due_with_properties_restored(sem_config):
    async def main():
        clock = FakeTime()
        async with Broker(sem_config, wall_clock=clock.wall_ms, timers=clock) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            sent = clock.now_ms
            r = await broker.put_message(Message(
                "T", b"later", {"TAGS": "A", "KEYS": "k1", "DELAY": "1", "UNIQ_KEY": "U1"}, queue_id=1))
            assert r.queue_id == 1  # the real queue, as RocketMQ answers the producer
            assert broker.max_offset("T", 1) == 0  # parked, invisible
            assert broker.max_offset(SCHEDULE_TOPIC, 0) == 1
            await clock.until_pending(sent + 1000)  # level 1 sleeps until the message is due
            clock.advance(0.999)
            assert broker.max_offset("T", 1) == 0  # not a millisecond early
            clock.advance(0.001)
            [m] = await _next(broker, "T", 1, 0)
            assert m.body == b"later" and m.tags == "A" and m.keys == ["k1"]
            assert m.uniq_key == "U1"
            for gone in ("DELAY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS"):
                assert gone not in m.properties
            assert broker.message_by_unique_key("T", "U1").body == b"later"
    run(main())


def test_levels_order_and_clamp_to_max(sem_config):
    async def main():
        clock = FakeTime()
        async with Broker(sem_config, wall_clock=clock.wall_ms, timers=clock) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            sent = clock.now_ms
            for level in (3, 1, 2, 99):
                await broker.put_message(Message("T", str(level).encode(), {"DELAY": str(level)}, queue_id=0))
            await broker.put_message(Message("T", b"now", {"DELAY": "0"}, queue_id=0))
            got = [m.body for m in await _next(broker, "T", 0, 0)]
            assert got == [b"now"]
            for second, due in ((1, [b"1"]), (2, [b"2"]), (3, [b"3", b"99"])):  # 99: the last level
                await clock.until_pending(sent + 1000 * second)
                clock.advance((sent + 1000 * second - clock.now_ms) / 1000)
                arrived: list[bytes] = []
                while len(arrived) < len(due):
                    arrived += [m.body for m in await _next(broker, "T", 0, len(got) + len(arrived))]
                assert sorted(arrived) == due
                got += arrived
    run(main())


def test_delivery_time_properties(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            sent = ms()
            await broker.put_message(Message("T", b"abs", {"TIMER_DELIVER_MS": str(sent + 2500)}, queue_id=0))
            await broker.put_message(Message("T", b"rel", {"TIMER_DELAY_SEC": "0.4"}, queue_id=0))
            await broker.put_message(Message("T", b"past", {"TIMER_DELIVER_MS": str(sent - 10)}, queue_id=0))
            got = await _take(broker, "T", 0, 3, 6)
            by_body = {m.body: m for m, _ in got}
            assert [m.body for m, _ in got][0] == b"past"
            assert by_body[b"rel"].store_timestamp >= sent + 400
            abs_msg = by_body[b"abs"]
            assert abs_msg.store_timestamp >= sent + 2500  # never early
            assert abs_msg.store_timestamp < sent + 2500 + 1500  # late by less than a level hop
            assert "TIMER_DELIVER_MS" not in abs_msg.properties
    run(main())


def test_pending_delays_survive_a_clean_restart(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await broker.put_message(Message("T", b"first", {"DELAY": "1"}, queue_id=0))
            sent = ms()
            await broker.put_message(Message("T", b"second", {"DELAY": "2"}, queue_id=0))
            await _take(broker, "T", 0, 1, 3)
        path = os.path.join(sem_config.store_path_root_dir, "config", "delayOffset.json")
        with open(path) as f:
            assert json.load(f)["offsetTable"] == {"1": 1}
        async with Broker(sem_config) as broker:
            got = await _take(broker, "T", 0, 2, 4)
            assert [m.body for m, _ in got] == [b"first", b"second"]
            assert got[1][0].store_timestamp >= sent + 2000
            # both levels have recorded their message as delivered: nothing can come again
            await _until(lambda: broker.delay_offsets.table.get(1) == 1 and broker.delay_offsets.table.get(2) == 1)
            assert broker.max_offset("T", 0) == 2  # delivered once each
    run(main())


def test_batches_cannot_be_delayed(sem_config):
    import pytest

    from rocketport.core.errors import InvalidMessage

    async def main():
        async with Broker(sem_config) as broker:
            with pytest.raises(InvalidMessage):
                await broker.put_messages([Message("T", b"x", {"DELAY": "1"}, queue_id=0)])
            with pytest.raises(InvalidMessage):
                await broker.put_message(Message("T", b"x", {"DELAY": "soon"}, queue_id=0))
    run(main())


def test_a_failed_delivery_round_is_retried_not_skipped(sem_config):
    from rocketport.core.errors import StoreUnavailable

    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            real_deliver = broker.schedule._deliver
            failures = []

            async def flaky(msgs):
                if not failures:
                    failures.append(msgs[0].body)
                    raise StoreUnavailable("disk full")
                return await real_deliver(msgs)

            broker.schedule._deliver = flaky
            await broker.put_message(Message("T", b"kept", {"DELAY": "1"}, queue_id=0))
            got = await _take(broker, "T", 0, 1, 4)
            assert failures == [b"kept"] and [m.body for m, _ in got] == [b"kept"]
            # the level records its offset after the put returns
            await _until(lambda: broker.delay_offsets.table.get(1) == 1)
    run(main())


def test_a_round_keeps_each_queues_order_under_sync_flush(sem_config):
    """A round is put per queue (one append each, the queues together); a batch the store
    refuses as too large is put message by message, still in order."""
    sem_config.flush_disk_type = "SYNC_FLUSH"
    sem_config.max_message_size = 4096  # three of the big ones below exceed it together

    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=3, write_queue_nums=3)
            for i in range(60):
                await broker.put_message(Message("T", f"{i}".encode(), {"DELAY": "1"},
                                                 queue_id=i % 3))
            for i in range(3):
                await broker.put_message(Message("T", b"b" * 1000, {"DELAY": "1", "p": "x" * 3000,
                                                                    "i": str(i)}, queue_id=2))
            small = [await _take(broker, "T", q, 20, 6) for q in (0, 1)]
            for q, got in enumerate(small):
                assert [int(m.body) for m, _ in got] == list(range(q, 60, 3))
            got = await _take(broker, "T", 2, 23, 6)
            assert [m.body for m, _ in got[:20]] == [f"{i}".encode() for i in range(2, 60, 3)]
            assert [m.properties["i"] for m, _ in got[20:]] == ["0", "1", "2"]
    run(main())


def test_bad_delay_level_configuration_is_refused():
    import pytest

    from rocketport.core.config import BrokerConfig
    from rocketport.core.errors import ConfigError

    with pytest.raises(ConfigError, match="messageDelayLevel"):
        BrokerConfig.from_mapping({"messageDelayLevel": "1s 5x"})
    assert BrokerConfig.from_mapping({"transactionCheckMax": "3"}).transaction_check_max == 3
