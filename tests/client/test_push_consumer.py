"""PushConsumer against a live broker: rebalance, broadcasting, retries, orderly, flow
control, offset commits, heartbeats and unregistration."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

from rocketport.client import (
    AdminClient,
    ConsumeResult,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rocketport.client.rebalance import allocate_averagely, allocate_averagely_by_circle
from rocketport.protocols.remoting import RequestCode
from rocketport.protocols.remoting.bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    decode_body,
    encode_body,
)
from rocketport.protocols.remoting.client import RemotingClient, request
from tests.support.aio import run


async def wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def produce(namesrv: str, topic: str, bodies: list[bytes], **fields) -> None:
    async with Producer(namesrv, "PG") as producer:
        for body in bodies:
            await producer.send(Message(topic, body, **fields))


async def lock_as(addr: str, group: str, client_id: str, queues: list) -> list:
    """LOCK_BATCH_MQ as another client of `group` would send it: the queues granted."""
    body = encode_body(LockBatchRequestBody(group, client_id, queues))
    async with await RemotingClient.connect(addr) as raw:
        response = await raw.invoke(request(RequestCode.LOCK_BATCH_MQ, body=body))
    return decode_body(LockBatchResponseBody, bytes(response.body)).lock_ok_mq_set


def collector(sink: list, result: ConsumeResult = ConsumeResult.SUCCESS):
    async def listener(msgs):
        sink.extend(msgs)
        return result
    return listener


def test_allocation_strategies():
    queues = [MessageQueue("T", "b", i) for i in range(8)]
    ids = ["c1", "c2", "c3"]
    avg = [allocate_averagely(queues, ids, c) for c in ids]
    assert [[q.queue_id for q in share] for share in avg] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    circle = [allocate_averagely_by_circle(queues, ids, c) for c in ids]
    assert [[q.queue_id for q in share] for share in circle] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert allocate_averagely(queues[:2], ids, "c3") == []
    assert allocate_averagely(queues, ids, "stranger") == []


def test_two_consumers_split_the_queues_and_rebalance_when_one_leaves(broker):
    async def main():
        await produce(broker.namesrv, "Split", [b"warm"])
        got: list = []
        first = PushConsumer("SplitGroup", broker.namesrv, consume_from="first",
                             allocate="avg_by_circle")
        second = PushConsumer("SplitGroup", broker.namesrv, consume_from="first",
                              allocate="avg_by_circle")
        for c in (first, second):
            c.subscribe("Split")
            c.register(collector(got))
        await first.start()
        await second.start()
        topic_queues = lambda c: {q for q in c.assigned if q.topic == "Split"}
        await wait_for(lambda: len(topic_queues(first)) == 4 and len(topic_queues(second)) == 4)
        assert not topic_queues(first) & topic_queues(second)
        await produce(broker.namesrv, "Split", [b"a%d" % i for i in range(40)])
        await wait_for(lambda: {m.body for m in got} >= {b"a%d" % i for i in range(40)})
        await second.shutdown()  # its queues move to the first consumer
        await wait_for(lambda: len(topic_queues(first)) == 8)
        await produce(broker.namesrv, "Split", [b"b%d" % i for i in range(40)])
        expected = {b"warm"} | {b"a%d" % i for i in range(40)} | {b"b%d" % i for i in range(40)}
        await wait_for(lambda: {m.body for m in got} == expected)
        await first.shutdown()
        duplicates = [body for body, n in Counter(m.body for m in got).items() if n > 1]
        assert len(duplicates) <= 8  # at-least-once: only what was in flight at the move
    run(main())


def test_broadcasting_delivers_everything_to_everyone_with_a_local_offset_file(broker, tmp_path):
    async def main():
        await produce(broker.namesrv, "Bcast", [b"warm"])
        sinks: list[list] = [[], []]
        consumers = [PushConsumer("BcastGroup", broker.namesrv, model="broadcasting",
                                  consume_from="first", offset_store_dir=tmp_path / str(i),
                                  instance_name="node")
                     for i in range(2)]
        for c, sink in zip(consumers, sinks):
            c.subscribe("Bcast")
            c.register(collector(sink))
            await c.start()
        await produce(broker.namesrv, "Bcast", [b"m%d" % i for i in range(20)])
        want = {b"warm"} | {b"m%d" % i for i in range(20)}
        await wait_for(lambda: all({m.body for m in s} == want for s in sinks))
        for c in consumers:
            await c.shutdown()
        [path] = (tmp_path / "0").rglob("offsets.json")
        table = json.loads(path.read_text())["offsetTable"]
        assert sum(table.values()) == 21
        # restarted, the first node resumes after what it consumed
        again: list = []
        c = PushConsumer("BcastGroup", broker.namesrv, model="broadcasting", consume_from="first",
                         offset_store_dir=tmp_path / "0", instance_name="node")
        c.subscribe("Bcast")
        c.register(collector(again))
        await c.start()
        await produce(broker.namesrv, "Bcast", [b"late"])
        await wait_for(lambda: [m.body for m in again] == [b"late"])
        await c.shutdown()
    run(main())


def test_reconsume_later_and_exceptions_come_back_from_the_retry_topic(broker):
    async def main():
        await produce(broker.namesrv, "Retry", [b"warm"])
        seen: list = []

        async def listener(msgs):
            for m in msgs:
                seen.append((m.body, m.reconsume_times, m.topic))
                if m.body == b"later" and m.reconsume_times < 2:
                    return ConsumeResult.RECONSUME_LATER
                if m.body == b"boom" and m.reconsume_times < 1:
                    raise RuntimeError("listener failure")
            return ConsumeResult.SUCCESS

        c = PushConsumer("RetryGroup", broker.namesrv, consume_from="first")
        c.subscribe("Retry")
        c.register(listener)
        await c.start()
        await produce(broker.namesrv, "Retry", [b"later", b"boom", b"fine"], tags="T",
                      keys="k", properties={"p": "v"})
        await wait_for(lambda: (b"later", 2, "Retry") in seen and (b"boom", 1, "Retry") in seen,
                       timeout_s=30)
        await c.shutdown()
        assert [s for s in seen if s[0] == b"fine"] == [(b"fine", 0, "Retry")]
    run(main())


def test_dead_letter_queue_after_max_reconsume_times(broker):
    async def main():
        await produce(broker.namesrv, "Dead", [b"warm"])
        attempts: list = []

        async def listener(msgs):
            attempts.extend(m.reconsume_times for m in msgs if m.body == b"poison")
            return ConsumeResult.SUCCESS if msgs[0].body == b"warm" else ConsumeResult.RECONSUME_LATER

        c = PushConsumer("DeadGroup", broker.namesrv, consume_from="first", max_reconsume_times=2)
        c.subscribe("Dead")
        c.register(listener)
        await c.start()
        await produce(broker.namesrv, "Dead", [b"poison"])
        await wait_for(lambda: attempts == [0, 1, 2], timeout_s=30)
        async with AdminClient(broker.namesrv) as admin:  # a DLQ is write-only, as in RocketMQ
            await wait_for(lambda: broker.call(lambda: broker.server.broker.get_topic("%DLQ%DeadGroup")))
            await admin.create_topic("%DLQ%DeadGroup", queue_nums=1, perm=6)
        async with PullConsumer("DlqReader", broker.namesrv, consume_from="first") as reader:
            reader.assign(await reader.queues("%DLQ%DeadGroup"))
            dead: list = []
            for _ in range(50):
                dead += await reader.poll(timeout_s=0.2)
                if dead:
                    break
        assert [m.body for m in dead] == [b"poison"]
        await asyncio.sleep(1.5)
        assert attempts == [0, 1, 2]
        await c.shutdown()
    run(main())


def test_orderly_consumer_keeps_per_queue_order_and_holds_the_locks(broker):
    async def main():
        await produce(broker.namesrv, "Ordered", [b"warm"])
        got: list = []
        failed_once: set = set()

        async def listener(msgs):
            for m in msgs:
                if m.body == b"3:5" and m.body not in failed_once:  # retried in place
                    failed_once.add(m.body)
                    return ConsumeResult.RECONSUME_LATER
                got.append(m)
            return ConsumeResult.SUCCESS

        c = PushConsumer("OrderGroup", broker.namesrv, consume_from="first", orderly=True,
                         suspend_current_queue_s=0.1)
        c.subscribe("Ordered")
        c.register(listener)
        await c.start()
        async with Producer(broker.namesrv, "PG") as producer:
            for step in range(10):
                for order_id in range(6):
                    await producer.send(Message("Ordered", f"{order_id}:{step}".encode()),
                                        selector=lambda qs, m, a: qs[a % len(qs)], arg=order_id)
        await wait_for(lambda: len(got) >= 61)
        # another client of the group gets no lock while this one holds them
        held = c.assigned
        assert await lock_as(broker.addr, "OrderGroup", "intruder", held) == []
        assert all(c.process_queue_info(mq).last_lock_timestamp > 0 for mq in held)  # consumerStatus shows it
        await c.shutdown()
        steps: dict[str, list[int]] = {}
        for m in got:
            if m.body != b"warm":
                order_id, step = m.body.decode().split(":")
                steps.setdefault(order_id, []).append(int(step))
        assert steps == {str(i): list(range(10)) for i in range(6)}
        # shutdown released them
        assert len(await lock_as(broker.addr, "OrderGroup", "intruder", held)) == len(held)
    run(main())


def test_flow_control_caps_cached_messages_per_queue(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            q0 = MessageQueue("Flow", "broker-a", 0)
            await producer.send_batch([Message("Flow", b"x%d" % i) for i in range(500)], queue=q0)
        release = asyncio.Event()
        got: list = []

        async def slow(msgs):
            got.extend(msgs)
            await release.wait()
            return ConsumeResult.SUCCESS

        c = PushConsumer("FlowGroup", broker.namesrv, consume_from="first",
                         pull_threshold_for_queue=50, pull_batch_size=32)
        c.subscribe("Flow")
        c.register(slow)
        await c.start()
        await wait_for(lambda: len(got) >= 1)
        q0 = MessageQueue("Flow", "broker-a", 0)
        cached = lambda: c.process_queue_info(q0).cached_msg_count
        await wait_for(lambda: cached() >= 50)  # pulled up to the threshold ...
        await asyncio.sleep(1.0)
        assert cached() < 50 + 32  # ... then paused: one pull of 32 past it at most
        assert len(got) == 20  # consume_thread_max listener calls, all waiting
        release.set()
        await wait_for(lambda: len(got) == 500)
        await c.shutdown()
    run(main())


def test_offsets_committed_on_shutdown_and_periodically(broker):
    async def main():
        await produce(broker.namesrv, "Commit", [b"m%d" % i for i in range(10)])
        got: list = []
        c = PushConsumer("CommitGroup", broker.namesrv, consume_from="first",
                         persist_interval_s=0.2)
        c.subscribe("Commit")
        c.register(collector(got))
        await c.start()
        await wait_for(lambda: len(got) == 10)
        async with AdminClient(broker.namesrv) as admin:
            queues = await admin.queues("Commit")

            async def committed():
                return sum([max(0, await admin.committed_offset("CommitGroup", q)) for q in queues])

            deadline = time.monotonic() + 10
            while await committed() != 10:  # the periodic commit, before any shutdown
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
            await c.shutdown()
            # a new consumer of the group starts after the committed offsets
            again: list = []
            c2 = PushConsumer("CommitGroup", broker.namesrv, consume_from="first")
            c2.subscribe("Commit")
            c2.register(collector(again))
            await c2.start()
            await produce(broker.namesrv, "Commit", [b"new"])
            await wait_for(lambda: [m.body for m in again] == [b"new"])
            await c2.shutdown()
            assert await committed() == 11
    run(main())


def test_heartbeat_carries_subscriptions_and_shutdown_unregisters(broker):
    async def main():
        await produce(broker.namesrv, "Beat", [b"warm"])
        c = PushConsumer("BeatGroup", broker.namesrv)
        c.subscribe("Beat", "TagA || TagB")
        c.register(collector([]))
        await c.start()
        manager = broker.server.broker.consumer_manager
        sub = broker.call(lambda: manager.find_subscription("BeatGroup", "Beat"))
        assert sub.sub_string == "TagA || TagB"
        async with AdminClient(broker.namesrv) as admin:
            assert await admin.consumer_ids("BeatGroup", "Beat") == [c.runtime.client_id]
            await c.shutdown()
            assert await admin.consumer_ids("BeatGroup", "Beat") == []
    run(main())


def test_tag_and_sql_filters(broker):
    async def main():
        await produce(broker.namesrv, "Filter", [b"warm"])
        tagged: list = []
        by_sql: list = []
        c1 = PushConsumer("TagGroup", broker.namesrv)
        c1.subscribe("Filter", "A || C")
        c1.register(collector(tagged))
        c2 = PushConsumer("SqlGroup", broker.namesrv)
        c2.subscribe("Filter", sql="n > 5")
        c2.register(collector(by_sql))
        await c1.start()
        await c2.start()
        async with Producer(broker.namesrv, "PG") as producer:
            for i in range(10):
                await producer.send(Message("Filter", b"%d" % i, tags="ABC"[i % 3],
                                            properties={"n": str(i)}))
        await wait_for(lambda: len(tagged) == 7 and len(by_sql) == 4)
        await c1.shutdown()
        await c2.shutdown()
        assert sorted(int(m.body) for m in tagged) == [0, 2, 3, 5, 6, 8, 9]
        assert sorted(int(m.body) for m in by_sql) == [6, 7, 8, 9]
    run(main())
