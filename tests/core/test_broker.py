import asyncio

import pytest

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.errors import (
    InvalidTopicName,
    MessageNotFound,
    MessageTooLarge,
    QueueNotFound,
    TopicNotFound,
)


def run(coro):
    return asyncio.run(coro)


def test_auto_create_round_robin_and_validation(small_config):
    async def main():
        async with Broker(small_config) as broker:
            results = [await broker.put_message(Message("Orders", b"x")) for _ in range(16)]
            assert sorted({r.queue_id for r in results}) == list(range(8))
            assert broker.get_topic("Orders").write_queue_nums == 8
            with pytest.raises(InvalidTopicName):
                await broker.put_message(Message("bad topic!", b"x"))
            with pytest.raises(InvalidTopicName):
                await broker.put_message(Message("t" * 128, b"x"))
            for name in (".", ".."):
                with pytest.raises(InvalidTopicName):
                    await broker.put_message(Message(name, b"x"))
            dotted = await broker.put_message(Message("logs.app-1", b"x", queue_id=0))
            got = broker.get_messages("logs.app-1", 0, dotted.queue_offset, 1)
            assert [m.body for m in got.messages()] == [b"x"]
            with pytest.raises(QueueNotFound):
                await broker.put_message(Message("Orders", b"x", queue_id=8))
    run(main())


def test_auto_create_disabled_and_delete(small_config):
    cfg = small_config.with_overrides(auto_create_topic_enable=False)
    async def main():
        async with Broker(cfg) as broker:
            with pytest.raises(TopicNotFound):
                await broker.put_message(Message("Nope", b"x"))
            broker.create_topic("Yes", write_queue_nums=2, read_queue_nums=2)
            await broker.put_message(Message("Yes", b"x", queue_id=1))
            assert broker.max_offset("Yes", 1) == 1
            broker.delete_topic("Yes")
            assert broker.get_topic("Yes") is None and broker.max_offset("Yes", 1) == 0
            with pytest.raises(TopicNotFound):
                broker.delete_topic("Yes")
    run(main())


def test_oversize_rejected_and_nothing_stored(small_config):
    cfg = small_config.with_overrides(max_message_size=4096)
    async def main():
        async with Broker(cfg) as broker:
            with pytest.raises(MessageTooLarge):
                await broker.put_message(Message("T", b"x" * 5000, queue_id=0))
            assert broker.stats().put_messages == 0
    run(main())


def test_offsets_topics_groups_persist_across_restart(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("P", write_queue_nums=3, read_queue_nums=3)
            r = await broker.put_message(Message("P", b"hello", {"KEYS": "key-1"}, queue_id=2))
            broker.commit_offset("g1", "P", 2, 1)
            assert broker.get_group("g1").retry_max_times == 16
            msg_id = r.msg_id
        async with Broker(small_config) as broker:
            assert broker.get_topic("P").write_queue_nums == 3
            assert broker.query_offset("g1", "P", 2) == 1
            assert broker.query_offset("g1", "P", 0) == -1
            assert "g1" in broker.groups.table
            assert broker.view_message(msg_id).body == b"hello"
            assert [m.body for m in broker.query_by_key("P", "key-1")] == [b"hello"]
            with pytest.raises(MessageNotFound):
                broker.view_message("zz")
            stats = broker.stats()
            assert stats.topics == 1 and stats.commit_log_max_offset > 0
    run(main())


def test_get_through_facade(small_config):
    async def main():
        async with Broker(small_config) as broker:
            await broker.put_messages([Message("G", bytes([i]), queue_id=0) for i in range(10)])
            res = broker.get_messages("G", 0, 2, 5)
            assert [m.body for m in res.messages()] == [bytes([i]) for i in range(2, 7)]
            assert broker.offset_by_timestamp("G", 0, 0) == 0
    run(main())


def test_wait_for_message_wakes_on_put_and_times_out(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("W", write_queue_nums=2, read_queue_nums=2)
            assert not await broker.wait_for_messages([("W", 0, 0)], 0.05)
            waiter = asyncio.create_task(broker.wait_for_messages([("W", 0, 0)], 10))
            other = asyncio.create_task(broker.wait_for_messages([("W", 1, 0)], 0.3))
            await asyncio.sleep(0.05)
            assert not waiter.done()
            await broker.put_message(Message("W", b"x", queue_id=0))
            assert await waiter is True  # woken by the put (its own timeout is 10 s)
            assert await other is False  # a put to another queue does not wake it
            assert await broker.wait_for_messages([("W", 0, 0)], 1) is True  # data already there
    run(main())


def test_offset_by_record_timestamp_uses_born_times(small_config):
    async def main():
        async with Broker(small_config) as broker:
            for born in (100, 200, 300):
                await broker.put_message(Message("Born", b"x", queue_id=0, born_timestamp=born))
            assert broker.offset_by_record_timestamp("Born", 0, 0) == (0, 100)
            assert broker.offset_by_record_timestamp("Born", 0, 150) == (1, 200)
            assert broker.offset_by_record_timestamp("Born", 0, 300) == (2, 300)
            assert broker.offset_by_record_timestamp("Born", 0, 301) == (3, -1)
            assert broker.offset_by_record_timestamp("Nope", 0, 0) == (0, -1)
    run(main())
