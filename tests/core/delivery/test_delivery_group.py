"""The core's server-side delivery groups (what STOMP subscriptions and AMQP queues use),
driven through the Broker facade on a real store."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.message import Message, MessageExt, decode_properties
from rocketport.common.tags import tags_code
from rocketport.core.broker import Broker
from rocketport.core.delivery import Delivery, Source
from tests.support.aio import run

TOPIC = "orders"


@pytest.fixture
def config(small_config):
    """Two queues per topic, a 1 s first delay level, roomy segments."""
    return dataclasses.replace(small_config, default_topic_queue_nums=2, message_delay_level="1s 2s 3s",
                               mapped_file_size_commit_log=1 << 20, flush_delay_offset_interval=50)


async def _send(broker: Broker, n: int, *, topic: str = TOPIC, tags: str | None = None,
                props: dict[str, str] | None = None, start: int = 0) -> None:
    for i in range(start, start + n):
        properties = dict(props or {})
        if tags:
            properties["TAGS"] = tags
        await broker.put_message(Message(topic, b"m%d" % i, properties))


async def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def _bodies(deliveries: list[Delivery]) -> list[bytes]:
    return sorted(d.message.body for d in deliveries)


def test_competing_subscribers_share_messages_once_each_within_prefetch(config):
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 40)
            group = broker.delivery_group("g1", [Source(TOPIC)], start="first")
            a: list[Delivery] = []
            b: list[Delivery] = []
            sub_a = group.subscribe(a.append, prefetch=5)
            group.subscribe(b.append, prefetch=100)
            await _until(lambda: len(a) == 5 and len(b) == 35)
            assert len(a) == 5 and sub_a.unacked == 5  # prefetch holds
            group.ack(d.tag for d in a)
            await _until(lambda: len(a) + len(b) == 40)
            group.ack(d.tag for d in a + b)
            assert _bodies(a + b) == sorted(b"m%d" % i for i in range(40))
            assert not any(d.redelivered for d in a + b)
            assert sum(broker.query_offset("g1", TOPIC, q) for q in range(2)) == 40
    run(main())


def test_committed_offset_is_the_lowest_unacknowledged(config):
    async def main():
        async with Broker(config) as broker:
            broker.create_topic("one", read_queue_nums=1, write_queue_nums=1)
            await _send(broker, 5, topic="one")
            group = broker.delivery_group("g2", [Source("one")], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append)
            await _until(lambda: len(got) == 5)
            by_offset = {d.message.queue_offset: d.tag for d in got}
            group.ack([by_offset[1], by_offset[2], by_offset[4]])
            assert broker.query_offset("g2", "one", 0) == 0
            group.ack([by_offset[0]])
            assert broker.query_offset("g2", "one", 0) == 3
            group.ack([by_offset[3]])
            assert broker.query_offset("g2", "one", 0) == 5
    run(main())


def test_unacked_of_a_leaving_subscriber_go_to_the_others_marked_redelivered(config):
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 10)
            group = broker.delivery_group("g3", [Source(TOPIC)], start="first")
            first: list[Delivery] = []
            sub = group.subscribe(first.append, prefetch=4)
            await _until(lambda: len(first) == 4)
            group.ack([first[0].tag])
            second: list[Delivery] = []
            await group.unsubscribe(sub)
            group.subscribe(second.append)
            await _until(lambda: len(second) == 9)
            redelivered = {d.message.body for d in second if d.redelivered}
            assert redelivered == {d.message.body for d in first[1:]}
            assert _bodies(first[:1] + second) == sorted(b"m%d" % i for i in range(10))
    run(main())


def test_nack_requeue_and_retry_then_dead_letter(config):
    async def main():
        async with Broker(config) as broker:
            cfg = broker.get_group("g4")
            broker.update_group(dataclasses.replace(cfg, retry_max_times=1))
            broker.create_topic("one", read_queue_nums=1, write_queue_nums=1)
            await _send(broker, 1, topic="one", props={"color": "red"})
            group = broker.delivery_group("g4", [Source("one")], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append)
            await _until(lambda: len(got) == 1)
            assert await group.nack([got[0].tag], requeue=True) == 1
            await _until(lambda: len(got) == 2)
            assert got[1].redelivered and got[1].message.body == b"m0"
            await group.nack([got[1].tag], requeue=False, delay_level=1)  # 1 s
            assert broker.query_offset("g4", "one", 0) == 1  # answered: sent back
            await _until(lambda: len(got) == 3, timeout=15)
            back = got[2].message
            assert back.body == b"m0" and back.reconsume_times == 1 and back.topic == "one"
            assert back.properties["color"] == "red"
            await group.nack([got[2].tag], requeue=False)  # over retryMaxTimes: dead letter
            dlq = broker.store.get_messages("%DLQ%g4", 0, 0, 10)  # write-only to consumers
            assert [m.body for m in dlq.messages()] == [b"m0"]
    run(main())


def test_start_last_takes_only_what_is_sent_after_the_group_opens(config):
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 6)
            late = broker.delivery_group("late", [Source(TOPIC)], start="last")
            early = broker.delivery_group("early", [Source(TOPIC)], start="first")
            await _send(broker, 3, start=100)
            got_late: list[Delivery] = []
            got_early: list[Delivery] = []
            late.subscribe(got_late.append, auto_ack=True)
            early.subscribe(got_early.append, auto_ack=True)
            await _until(lambda: len(got_late) == 3 and len(got_early) == 9)
            assert _bodies(got_late) == [b"m100", b"m101", b"m102"]
            # a topic created after a "last" group opened is read from its start
            fresh = broker.delivery_group("fresh", [Source("newtopic")], start="last")
            got_fresh: list[Delivery] = []
            fresh.subscribe(got_fresh.append, auto_ack=True)
            await _send(broker, 2, topic="newtopic")
            await _until(lambda: len(got_fresh) == 2)
    run(main())


def test_filters_tags_sql_predicate_and_several_sources_on_one_topic(config):
    async def main():
        async with Broker(config) as broker:
            broker.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)  # read in order
            await _send(broker, 3, tags="a", props={"n": "1"})
            await _send(broker, 3, tags="b", props={"n": "7"}, start=10)
            await _send(broker, 3, tags="c", props={"n": "9"}, start=20)
            cases = {
                "tag": [Source(TOPIC, "a || c")],
                "sql": [Source(TOPIC, "n > 5", sql=True)],
                "pred": [Source(TOPIC, match=lambda m: m.body.endswith(b"1"))],
                "multi": [Source(TOPIC, "a"), Source(TOPIC, "n = 9", sql=True)],
            }
            want = {"tag": 6, "sql": 6, "pred": 3, "multi": 6}
            got: dict[str, list[Delivery]] = {name: [] for name in cases}
            for name, sources in cases.items():
                broker.delivery_group(name, sources, start="first").subscribe(got[name].append)
            await _until(lambda: all(len(got[n]) == want[n] for n in cases))
            assert {d.message.tags for d in got["tag"]} == {"a", "c"}
            assert {d.message.tags for d in got["sql"]} == {"b", "c"}
            assert _bodies(got["pred"]) == [b"m1", b"m11", b"m21"]
            assert {d.message.tags for d in got["multi"]} == {"a", "c"}
            # nothing more came: a later message every filter passes is the next for each
            await _send(broker, 1, tags="a", props={"n": "9"}, start=31)
            await _until(lambda: all(len(got[n]) > want[n] for n in cases))
            assert all(len(got[n]) == want[n] + 1 and got[n][-1].message.body == b"m31" for n in cases)
    run(main())


def test_get_purge_counts_and_pause(config):
    async def main():
        async with Broker(config) as broker:
            broker.create_topic("one", read_queue_nums=1, write_queue_nums=1)
            group = broker.delivery_group("g5", [Source("one")], start="first")
            assert await group.get() is None
            await _send(broker, 5, topic="one")
            assert group.message_count == 5 and group.consumer_count == 0
            got = await group.get()
            assert got is not None and got.message.body == b"m0" and got.subscriber is None
            assert broker.query_offset("g5", "one", 0) == 0  # unacked
            group.ack([got.tag])
            assert broker.query_offset("g5", "one", 0) == 1
            assert await group.purge() == 4
            assert group.message_count == 0
            delivered: list[Delivery] = []
            sub = group.subscribe(delivered.append, auto_ack=True)
            sub.pause()
            # the barrier: a second subscriber gets what comes while the first is paused
            other: list[Delivery] = []
            second = group.subscribe(other.append, auto_ack=True)
            await _send(broker, 2, topic="one", start=50)
            await _until(lambda: len(other) == 2)
            assert delivered == []
            await group.unsubscribe(second)
            await _send(broker, 2, topic="one", start=52)
            sub.resume()
            await _until(lambda: len(delivered) == 2)
            assert _bodies(delivered) == [b"m52", b"m53"]
    run(main())


def test_a_restart_redelivers_what_was_never_acknowledged(config):
    async def main():
        async with Broker(config) as broker:
            broker.create_topic("one", read_queue_nums=1, write_queue_nums=1)
            await _send(broker, 6, topic="one")
            group = broker.delivery_group("g6", [Source("one")], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append)
            await _until(lambda: len(got) == 6)
            group.ack([d.tag for d in got if d.message.queue_offset in (0, 1, 3)])
        async with Broker(config) as broker:
            group = broker.delivery_group("g6", [Source("one")], start="first")
            again: list[Delivery] = []
            group.subscribe(again.append)
            await _until(lambda: len(again) == 4)
            assert [d.message.queue_offset for d in again] == [2, 3, 4, 5]
    run(main())


@pytest.mark.parametrize("many", [False, True])
def test_a_failing_deliver_callback_drops_only_its_subscriber(config, many):
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 4)
            group = broker.delivery_group("g7", [Source(TOPIC)], start="first")

            def broken(delivery: Delivery | list[Delivery]) -> None:
                raise ConnectionResetError("gone")

            group.subscribe(broken, many=many)
            good: list[Delivery] = []
            group.subscribe(good.extend if many else good.append, many=many)
            await _until(lambda: len(good) == 4)
            assert group.consumer_count == 1
            assert _bodies(good) == sorted(b"m%d" % i for i in range(4))
    run(main())


def test_a_subscriber_taking_lists_gets_each_slice_in_one_call_within_prefetch(config):
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 30)
            group = broker.delivery_group("g8", [Source(TOPIC)], start="first")
            calls: list[list[Delivery]] = []
            sub = group.subscribe(calls.append, prefetch=20, many=True)
            await _until(lambda: sum(map(len, calls)) == 20)
            await asyncio.sleep(0.05)
            assert sum(map(len, calls)) == 20 and sub.unacked == 20 and len(calls) < 20
            group.ack([d.tag for call in calls for d in call])
            await _until(lambda: sum(map(len, calls)) == 30)
            got = [d for call in calls for d in call]
            assert _bodies(got) == sorted(b"m%d" % i for i in range(30))
            assert [d.tag for d in got] == sorted(d.tag for d in got)
    run(main())


def test_dropped_group_forgets_its_offsets(config):
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 2)
            group = broker.delivery_group("temp", [Source(TOPIC)], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append, auto_ack=True)
            await _until(lambda: len(got) == 2)
            await broker.drop_delivery_group("temp")
            assert all(broker.query_offset("temp", TOPIC, q) < 0 for q in range(2))
            assert broker.delivery_group("temp", [Source(TOPIC)], start="first") is not group
    run(main())


def test_a_delivered_message_reads_as_its_stored_record(config):
    """Deliveries decode their records field by field as they are read: every field equals
    the store's whole decode, a field written stays written, and a changed properties
    dict is what the encoded properties then say."""
    async def main():
        async with Broker(config) as broker:
            await _send(broker, 3, tags="T", props={"k": "v"})
            group = broker.delivery_group("gf", [Source(TOPIC)], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append)
            await _until(lambda: len(got) == 3)
            stored = {(m.queue_id, m.queue_offset): m
                      for q in range(2) for m in broker.get_messages(TOPIC, q, 0, 32).messages()}
            fields = [f.name for f in dataclasses.fields(MessageExt)]
            for d in got:
                want = stored[(d.message.queue_id, d.message.queue_offset)]
                assert [getattr(d.message, f) for f in fields] == [getattr(want, f) for f in fields]
            first, second, third = (d.message for d in got)
            second.flag = 7
            second.topic = "elsewhere"
            assert (second.sys_flag, second.flag, second.topic) == (0, 7, "elsewhere")
            assert decode_properties(first.properties_bytes()) == {"k": "v", "TAGS": "T"}
            third.properties["k"] = "w"
            assert decode_properties(third.properties_bytes()) == {"k": "w", "TAGS": "T"}
    run(main())


def test_records_of_a_kafka_batch_are_delivered_and_sent_back_one_by_one(config):
    async def main():
        async with Broker(config) as broker:
            broker.create_topic("K", read_queue_nums=1, write_queue_nums=1)
            recs = [Record(i, 0, b"k%d" % i, b"v%d" % i, [("tag", b"T"), ("n", b"%d" % i)])
                    for i in range(5)]
            await broker.put_record_batch("K", 0, build_batch(recs, base_timestamp=1), len(recs),
                                          tags_codes=[tags_code("T")] * len(recs))
            group = broker.delivery_group("gk", [Source("K", "n >= 3", sql=True)], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append)
            await _until(lambda: len(got) == 2)
            assert [(d.message.body, d.message.tags, d.message.queue_offset) for d in got] == \
                [(b"v3", "T", 3), (b"v4", "T", 4)]
            await group.nack([got[0].tag], requeue=False, delay_level=1)
            await _until(lambda: len(got) == 3, timeout=15)
            assert got[2].message.body == b"v3" and got[2].message.reconsume_times == 1
    run(main())


def test_an_open_transaction_holds_the_group_at_its_start_without_a_busy_wait(config):
    async def main():
        async with Broker(config) as broker:
            broker.create_topic("X", read_queue_nums=1, write_queue_nums=1)
            group = broker.delivery_group("gx", [Source("X")], start="first")
            got: list[Delivery] = []
            group.subscribe(got.append, auto_ack=True)
            pid, epoch = await broker.init_transactional_producer("tx", 60_000)
            await broker.add_partitions_to_txn("tx", pid, epoch, [("X", 0)])
            broker.check_transactional_write(pid, epoch, "X", 0)
            batch = build_batch([Record(0, 0, None, b"in-txn")], base_timestamp=1, producer_id=pid,
                                producer_epoch=epoch, base_sequence=0, transactional=True)
            await broker.put_record_batch("X", 0, batch, 1)
            # a reader at the last stable offset waits for the transaction's end: it is not
            # told that a message is there (which made the group's pump spin on re-reads)
            assert await broker.wait_for_messages([("X", 0, 0)], 0.3) is False
            assert got == []
            await broker.end_txn("tx", pid, epoch, True)
            await _until(lambda: len(got) == 1)
            assert got[0].message.body == b"in-txn"
    run(main())


def test_a_queue_that_cannot_be_read_now_does_not_hold_the_loop(config):
    """Messages wait in a topic made write-only: the pump finds them readable by offset
    but cannot read them; it must keep yielding (a wait that ends at once, in a loop
    without an await that suspends, would hang the event loop), and deliver once the
    topic is readable again."""
    from rocketport.core.metadata.topics import PERM_RW, PERM_WRITE

    async def main():
        async with Broker(config) as broker:
            broker.create_topic(TOPIC, perm=PERM_RW)
            await _send(broker, 3)
            broker.create_topic(TOPIC, perm=PERM_WRITE)
            got: list[Delivery] = []
            broker.delivery_group("blocked", [Source(TOPIC)], start="first").subscribe(got.append, prefetch=10)
            ticks = 0
            for _ in range(20):
                await asyncio.sleep(0.005)  # each returns only if the pump yields
                ticks += 1
            assert ticks == 20 and got == []
            broker.create_topic(TOPIC, perm=PERM_RW)
            await _until(lambda: len(got) == 3)
    run(main())
