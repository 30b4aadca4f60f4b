"""Clients, queue locks, consume-from, offset reset, allocation and message ids."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketport.common.message import Message
from rocketport.common.message_id import decode_offset_msg_id, encode_offset_msg_id
from rocketport.core.broker import Broker
from rocketport.core.consumer.clients import SubscriptionData
from rocketport.core.consumer.locks import MessageQueueKey
from rocketport.core.errors import MessageNotFound
from tests.support.aio import run


class FakeClock:
    """Milliseconds that pass only when a test says so: expiry without real waiting."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


async def _until(condition, seconds: float = 5.0) -> None:
    """Let the broker's scan loop (a real 20 ms timer) run until ``condition`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition() and loop.time() < deadline:
        await asyncio.sleep(0.01)


def test_locks_are_exclusive_per_group_and_expire(sem_config):
    cfg = sem_config.with_overrides(rebalance_lock_max_live_time=100, client_scan_interval=20)
    clock = FakeClock()

    async def main():
        async with Broker(cfg, clock=clock) as broker:
            mqs = [MessageQueueKey("T", "broker-a", q) for q in range(4)]
            assert broker.lock_batch("g", mqs[:3], "c1") == set(mqs[:3])
            assert broker.lock_batch("g", mqs, "c2") == {mqs[3]}
            assert broker.lock_batch("other", mqs, "c2") == set(mqs)
            broker.unlock_batch("g", mqs[:1], "c1")
            assert broker.lock_batch("g", mqs[:1], "c2") == {mqs[0]}
            clock.now += 99
            assert broker.lock_batch("g", mqs, "c2") == {mqs[0], mqs[3]}  # c1's still live
            clock.now += 2  # c1 stopped renewing: its locks lapse
            assert broker.lock_batch("g", mqs, "c2") == set(mqs)
            await _until(lambda: len(broker.lock_manager) == 4)
            assert len(broker.lock_manager) == 4  # the "other" group's lapsed locks were purged
    run(main())


def test_silent_clients_are_dropped_by_the_owned_scan(sem_config):
    cfg = sem_config.with_overrides(channel_expired_timeout=100, client_scan_interval=20)
    clock = FakeClock()

    async def main():
        async with Broker(cfg, clock=clock) as broker:
            changes = []
            broker.consumer_manager.add_listener(lambda g, ids: changes.append((g, ids)))
            broker.consumer_manager.register("g", "c1", object(), "PUSH", "CLUSTERING",
                                             "CONSUME_FROM_LAST_OFFSET",
                                             {"T": SubscriptionData.from_expression("T", "*")})
            broker.producer_manager.register("P", "p1", object())
            assert broker.consumer_manager.client_ids("g") == ["c1"]
            await asyncio.sleep(0.1)  # scans run, but no time passes on the clock
            assert broker.consumer_manager.client_ids("g") == ["c1"]
            clock.now += 101
            await _until(lambda: broker.consumer_manager.client_ids("g") == [])
            assert broker.consumer_manager.client_ids("g") == []
            assert broker.producer_manager.client_ids("P") == []
            assert changes[-1] == ("g", [])
    run(main())


def test_reset_offsets_by_timestamp(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            for q in range(2):
                await broker.put_message(Message("T", b"a", queue_id=q))
            await asyncio.sleep(0.02)
            middle = time.time_ns() // 1_000_000
            await asyncio.sleep(0.02)
            await broker.put_message(Message("T", b"b", queue_id=1))
            broker.commit_offset("g", "T", 0, 1)
            assert broker.reset_offsets_by_timestamp("g", "T", middle) == {0: 1, 1: 1}
            assert broker.reset_offsets_by_timestamp("g", "T", 0) == {0: 0, 1: 0}
            assert broker.query_offset("g", "T", 1) == 0
    run(main())


def test_message_ids(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            r = await broker.put_message(Message("T", b"x", {"UNIQ_KEY": "AC11000100002A9F0000000000000001"}, queue_id=0))
            decoded = decode_offset_msg_id(r.msg_id)
            assert decoded.commit_log_offset == r.commit_log_offset
            assert decoded.port == sem_config.listen_port and decoded.host == sem_config.broker_ip1
            assert encode_offset_msg_id(decoded.host, decoded.port, r.commit_log_offset) == r.msg_id
            assert broker.view_message(r.msg_id).body == b"x"
            assert broker.message_by_unique_key("T", "AC11000100002A9F0000000000000001").body == b"x"
            with pytest.raises(MessageNotFound):
                broker.message_by_unique_key("T", "missing")
            with pytest.raises(MessageNotFound):
                decode_offset_msg_id("XYZ")
    run(main())
