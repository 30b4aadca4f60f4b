"""Filtered pull with long polling through the Broker facade."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.errors import ConsumeDisabled, GroupNotFound, TopicNotFound
from rocketport.core.filter import compile_filter
from rocketport.core.metadata.subscription_groups import SubscriptionGroupConfig
from rocketport.core.store.get_result import GetStatus
from tests.support.aio import run
from tests.support.fake_time import FakeTime


async def _fill(broker: Broker, topic: str, n: int, tag_of, props_of=lambda i: {}) -> None:
    for i in range(n):
        props = {"TAGS": tag_of(i), **props_of(i)}
        await broker.put_message(Message(topic, str(i).encode(), props, queue_id=0))


def test_tag_filter_returns_only_matches(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await _fill(broker, "T", 100, lambda i: "A" if i % 10 == 0 else "B")
            flt = compile_filter("TAG", "A || C")
            r = await broker.pull("g", "T", 0, 0, 32, message_filter=flt)
            assert r.status is GetStatus.FOUND
            msgs = list(r.messages())
            assert [m.body for m in msgs] == [str(i).encode() for i in range(0, 100, 10)]
            assert all(m.tags == "A" for m in msgs)
            assert r.next_begin_offset == 100
    run(main())


def test_sql_filter_returns_only_matches(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await _fill(broker, "T", 50, lambda i: "X", lambda i: {"n": str(i)} if i % 2 else {})
            flt = compile_filter("SQL92", "n BETWEEN 10 AND 20")
            r = await broker.pull("g", "T", 0, 0, 32, message_filter=flt)
            assert [m.body for m in r.messages()] == [str(i).encode() for i in (11, 13, 15, 17, 19)]
            # a missing property is false, never an error
            r = await broker.pull("g", "T", 0, 0, 32, message_filter=compile_filter("SQL92", "n IS NULL"))
            assert [int(m.body) for m in r.messages()] == list(range(0, 50, 2))[:32]
    run(main())


def test_filtered_scan_reads_records_in_place_across_commit_log_segments(sem_config):
    """The scan slices each candidate's properties out of the mapped CommitLog: bodies of
    every length, records in several segments, a tags-code collision ("Aa" and "BB" share
    Java's hashCode), a non-ASCII value and a property that is first or missing."""
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            for i in range(300):
                props = {"TAGS": ("Aa", "BB", "C")[i % 3], "n": str(i)}
                if i % 2:
                    props = {"w": "\u00fc", **props}
                body = b"b" * (1 + i * 37 % 9000)
                await broker.put_message(Message("T", body, props, queue_id=0))
            assert len(broker.store.commitlog.queue.files) > 1

            async def pulled(expression_type, expression):
                flt = compile_filter(expression_type, expression)
                got, offset = [], 0
                while offset < 300:
                    r = await broker.pull("g", "T", 0, offset, 32, message_filter=flt)
                    got += [int(m.properties["n"]) for m in r.messages()]
                    offset = r.next_begin_offset
                return got

            assert await pulled("TAG", "Aa") == list(range(0, 300, 3))
            assert await pulled("TAG", "BB || C") == [i for i in range(300) if i % 3]
            assert (await pulled("SQL92", "n >= 150 AND TAGS = 'BB'")
                    == [i for i in range(150, 300) if i % 3 == 1])
            assert await pulled("SQL92", "w = '\u00fc' AND n < 9") == [1, 3, 5, 7]
            assert await pulled("SQL92", "w IS NULL AND n < 9") == [0, 2, 4, 6, 8]
    run(main())


def _holds(pending):
    """The held pulls' timers among ``pending`` (the delay levels hold theirs for an hour)."""
    return [t for t in pending if t.delay_ms <= 5000]


def test_no_match_advances_next_offset_and_holds_until_hold_ends(sem_config):
    async def main():
        clock = FakeTime()
        async with Broker(sem_config, timers=clock) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await _fill(broker, "T", 20, lambda i: "B")
            held = asyncio.create_task(broker.pull("g", "T", 0, 0, 32, message_filter=compile_filter("TAG", "A"),
                                                   hold_s=0.2))
            [hold] = _holds(await clock.until(lambda pending: any(_holds(pending))))  # the pull holds
            clock.advance((hold.due_ms - clock.now_ms - 1) / 1000)
            assert not held.done()
            clock.advance(0.001)  # its hold ends
            r = await asyncio.wait_for(held, 30)
            assert r.message_count == 0 and not r.segments
            assert r.next_begin_offset == 20
    run(main())


def test_held_pull_wakes_on_matching_put_and_ignores_others(sem_config):
    async def main():
        clock = FakeTime()
        async with Broker(sem_config, timers=clock) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            flt = compile_filter("TAG", "A")
            held = asyncio.create_task(broker.pull("g", "T", 0, 0, 32, message_filter=flt, hold_s=5))
            [first] = _holds(await clock.until(lambda pending: any(_holds(pending))))
            await broker.put_message(Message("T", b"b", {"TAGS": "B"}, queue_id=0))
            await broker.put_message(Message("T", b"a-other-queue", {"TAGS": "A"}, queue_id=1))
            # a non-matching put woke it: it re-checked and held again (a new hold)
            await clock.until(lambda pending: [t.serial for t in _holds(pending)] > [first.serial])
            assert not held.done()
            await broker.put_message(Message("T", b"a", {"TAGS": "A"}, queue_id=0))
            r = await asyncio.wait_for(held, 1)  # woken by the put, long before its 5 s hold
            assert [m.body for m in r.messages()] == [b"a"]
            assert r.next_begin_offset == 2
    run(main())


def test_pull_on_a_missing_topic_is_refused_and_on_an_empty_queue_holds(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            started = time.monotonic()
            with pytest.raises(TopicNotFound):
                await broker.pull("g", "Nope", 0, 0, 32, hold_s=5)
            assert time.monotonic() - started < 1
            broker.create_topic("New", read_queue_nums=1, write_queue_nums=1)
            r = await broker.pull("g", "New", 0, 0, 32, hold_s=0.05)
            assert r.status is GetStatus.NO_MATCHED_LOGIC_QUEUE and r.message_count == 0  # no file yet
            held = asyncio.create_task(broker.pull("g", "New", 0, 0, 32, hold_s=5))
            await asyncio.sleep(0.02)
            await broker.put_message(Message("New", b"x", queue_id=0))
            r = await asyncio.wait_for(held, 1)
            assert [m.body for m in r.messages()] == [b"x"]
    run(main())


def test_offset_errors_answer_at_once(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await _fill(broker, "T", 3, lambda i: "A")
            started = time.monotonic()
            r = await broker.pull("g", "T", 0, 99, 32, hold_s=5)
            assert r.status is GetStatus.OFFSET_OVERFLOW_BADLY
            assert time.monotonic() - started < 0.5
    run(main())


def test_scan_limit_does_not_end_a_pull_early(sem_config, monkeypatch):
    import rocketport.core.store.reader as ms
    monkeypatch.setattr(ms, "MAX_SCAN_PER_GET", 100)
    monkeypatch.setattr(ms, "MAX_PREFILTERED_SCAN_PER_GET", 100)  # a tag filter's bound

    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await _fill(broker, "T", 1000, lambda i: "A" if i == 950 else "B")
            r = await broker.pull("g", "T", 0, 0, 32, message_filter=compile_filter("TAG", "A"),
                                  hold_s=1)
            assert [m.body for m in r.messages()] == [b"950"]
    run(main())


def test_consume_disabled_and_unknown_group_are_refused(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            broker.update_group(SubscriptionGroupConfig("off", consume_enable=False))
            with pytest.raises(ConsumeDisabled):
                await broker.pull("off", "T", 0, 0, 1)
            broker.update_group(SubscriptionGroupConfig("bc", consume_broadcast_enable=False))
            await broker.pull("bc", "T", 0, 0, 1)  # clustering (or unknown) is allowed
            broker.consumer_manager.register("bc", "c1", object(), "PULL", "BROADCASTING",
                                             "CONSUME_FROM_LAST_OFFSET", {})
            with pytest.raises(ConsumeDisabled):
                await broker.pull("bc", "T", 0, 0, 1)
        cfg = sem_config.with_overrides(auto_create_subscription_group=False)
        async with Broker(cfg) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            with pytest.raises(GroupNotFound):
                await broker.pull("nobody", "T", 0, 0, 1)
    run(main())


def test_stop_releases_held_pulls(sem_config):
    async def main():
        broker = Broker(sem_config)
        await broker.start()
        broker.create_topic("T", read_queue_nums=4, write_queue_nums=4)
        held = [asyncio.create_task(broker.pull("g", "T", q, 0, 1, hold_s=30)) for q in range(4)]
        await asyncio.sleep(0.02)
        started = time.monotonic()
        await broker.stop()
        results = await asyncio.wait_for(asyncio.gather(*held), 1)
        assert all(r.message_count == 0 for r in results)
        assert time.monotonic() - started < 1.0
    run(main())


def test_exact_tag_check_reads_the_tags_property_only(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            for props in ({"XTAGS": "A", "TAGS": "B"}, {"XTAGS": "A"}, {"TAGS": "A", "k": "TAGS\x01"},
                          {"KEYS": "k", "TAGS": "A"}):
                await broker.put_message(Message("T", b"x", props, queue_id=0))
            r = await broker.pull("g", "T", 0, 0, 32, message_filter=compile_filter("TAG", "A"))
            assert [m.queue_offset for m in r.messages()] == [2, 3]
            r = await broker.pull("g", "T", 0, 0, 32, message_filter=compile_filter("TAG", "B"))
            assert [m.queue_offset for m in r.messages()] == [0]
    run(main())


def test_deleting_a_topic_releases_its_held_pulls(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            held = asyncio.create_task(broker.pull("g", "T", 0, 0, 1, hold_s=30))
            await asyncio.sleep(0.02)
            broker.delete_topic("T")
            r = await asyncio.wait_for(held, 1)
            assert r.message_count == 0
    run(main())
