"""Producer against a live broker: what is sent is what a consumer reads, in every send form."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest

from rocketport.client import AdminClient, ClientError, Message, Producer, PullConsumer, SendStatus
from rocketport.common.message import COMPRESSED_FLAG
from rocketport.protocols.remoting import RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import BrokerData, QueueData
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.messages import decode_message_ext_records, decode_offset_msg_id
from tests.support.aio import run


async def read_all(namesrv: str, topic: str, count: int, group: str = "reader") -> list:
    """Every message of `topic` from the first offset, in queue order (bounded wait)."""
    async with PullConsumer(group, namesrv, consume_from="first") as consumer:
        consumer.assign(await consumer.queues(topic))
        got: list = []
        for _ in range(100):
            got += await consumer.poll(timeout_s=0.2, max_messages=1000)
            if len(got) >= count:
                break
        return got


def test_send_carries_body_tags_keys_and_properties(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            result = await producer.send(Message("Fields", b"hello", tags="TagA", keys=["k1", "k2"],
                                                 properties={"color": "blue", "n": "1"}))
            assert result.status is SendStatus.SEND_OK
            assert len(result.msg_id) == 32 and len(result.offset_msg_id) == 32
            assert result.queue_offset == 0 and result.queue.topic == "Fields"
            [msg] = await read_all(broker.namesrv, "Fields", 1)
            assert (msg.body, msg.tags, msg.keys) == (b"hello", "TagA", ["k1", "k2"])
            assert msg.properties["color"] == "blue" and msg.properties["n"] == "1"
            assert msg.msg_id == result.msg_id and msg.offset_msg_id == result.offset_msg_id
            assert (msg.queue_id, msg.queue_offset) == (result.queue_id, result.queue_offset)
            assert msg.born_timestamp <= msg.store_timestamp and msg.reconsume_times == 0
    run(main())


def test_round_robin_over_queues_and_batch_and_oneway(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            results = [await producer.send(Message("Spread", b"m%d" % i)) for i in range(16)]
            assert len({r.queue_id for r in results}) >= 4
            batch = await producer.send_batch([Message("Spread", b"b%d" % i, keys=f"bk{i}")
                                               for i in range(50)])
            assert batch.status is SendStatus.SEND_OK
            assert len(batch.msg_id.split(",")) == 50 and len(batch.offset_msg_id.split(",")) == 50
            for i in range(5):
                await producer.send_oneway(Message("Spread", b"o%d" % i))
            got = await read_all(broker.namesrv, "Spread", 71)
            assert sorted(m.body for m in got) == sorted(
                [b"m%d" % i for i in range(16)] + [b"b%d" % i for i in range(50)]
                + [b"o%d" % i for i in range(5)])
            batch_msgs = [m for m in got if m.body.startswith(b"b")]
            assert len({m.queue_id for m in batch_msgs}) == 1  # one batch, one queue
            assert {m.msg_id for m in batch_msgs} == set(batch.msg_id.split(","))
    run(main())


def test_a_batch_body_encoded_by_the_caller_goes_to_its_queue(broker):
    """send_batch_body: entries a writer built itself (common's batch layout, a UNIQ_KEY
    each) are stored as the messages they encode; over 4 MiB is refused before sending."""
    from rocketport.common.batch.message_batch import BatchMessage, encode_batch

    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            [mq] = [q for q in await producer.runtime.routes.publish_queues("Encoded") if q.queue_id == 1]
            body = encode_batch(BatchMessage(b"e%d" % i, {"TAGS": "T", "UNIQ_KEY": "ID%030d" % i})
                                for i in range(20))
            result = await producer.send_batch_body("Encoded", memoryview(body), queue=mq)
            assert result.status is SendStatus.SEND_OK and result.queue.queue_id == 1
            got = await read_all(broker.namesrv, "Encoded", 20)
            assert [(m.body, m.tags, m.msg_id, m.queue_id) for m in got] == [
                (b"e%d" % i, "T", "ID%030d" % i, 1) for i in range(20)]
            with pytest.raises(ClientError, match="exceeds"):
                await producer.send_batch_body("Encoded", b"x" * (4 * 1024 * 1024 + 1), queue=mq)
    run(main())


def test_selector_keeps_each_key_in_one_queue_in_order(broker):
    async def main():
        def by_order(queues, msg, order_id):
            return queues[order_id % len(queues)]

        async with Producer(broker.namesrv, "PG") as producer:
            for step in range(10):
                for order_id in range(5):
                    r = await producer.send(Message("Orders", f"{order_id}:{step}".encode()),
                                            selector=by_order, arg=order_id)
                    assert r.queue_id == order_id % 8
            got = await read_all(broker.namesrv, "Orders", 50)
        per_order: dict[int, list[int]] = {}
        for msg in sorted(got, key=lambda m: (m.queue_id, m.queue_offset)):
            order_id, step = map(int, msg.body.split(b":"))
            assert msg.queue_id == order_id % 8
            per_order.setdefault(order_id, []).append(step)
        assert per_order == {i: list(range(10)) for i in range(5)}
    run(main())


def test_large_bodies_are_compressed_with_the_sys_flag(broker):
    body = bytes(range(256)) * 64  # 16 KiB, compressible
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            result = await producer.send(Message("Big", body))
            small = await producer.send(Message("Big", b"tiny"))
        # the stored record: zlib with the COMPRESSED flag, as Java and C++ consumers expect
        async with await RemotingClient.connect(broker.addr) as raw:
            host, port, offset = decode_offset_msg_id(result.offset_msg_id)
            response = await raw.invoke(request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}))
        [record] = decode_message_ext_records(bytes(response.body))
        assert record.sys_flag & COMPRESSED_FLAG and zlib.decompress(record.body) == body
        async with AdminClient(broker.namesrv) as admin:
            assert not (await admin.view_message(small.offset_msg_id)).sys_flag & COMPRESSED_FLAG
        got = await read_all(broker.namesrv, "Big", 2)
        assert sorted(m.body for m in got) == sorted([body, b"tiny"])  # read back inflated
    run(main())


def test_errors_are_typed(broker):
    async def main():
        async with Producer(broker.namesrv, "PG", max_message_size=1024) as producer:
            with pytest.raises(ClientError) as bad_topic:
                await producer.send(Message("no spaces allowed", b"x"))
            assert bad_topic.value.code == ResponseCode.MESSAGE_ILLEGAL
            with pytest.raises(ClientError) as too_big:
                await producer.send_batch([Message("Sizes", b"x" * 100) for _ in range(20)])
            assert too_big.value.code == ResponseCode.MESSAGE_ILLEGAL
            with pytest.raises(ClientError):
                await producer.send(Message("Sizes", b""))
        with pytest.raises(ClientError, match="cannot connect"):
            async with Producer("127.0.0.1:1", "PG") as producer:
                await producer.send(Message("Sizes", b"x"))
    run(main())


def test_batch_limit_is_4_mib_by_default(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            with pytest.raises(ClientError, match="exceeds"):
                await producer.send_batch([Message("Sizes", b"x" * 1024 * 1024) for _ in range(5)])
    run(main())


def test_retry_on_another_broker_when_one_is_unreachable(broker, monkeypatch):
    """A send whose broker cannot be reached is retried on another broker's queue."""
    async def main():
        async with Producer(broker.namesrv, "PG", send_timeout_s=1.0) as producer:
            await producer.send(Message("Retry", b"warm"))  # the broker creates the topic
            routes = producer.runtime.routes
            real = routes.brokers["broker-a"]
            route = await routes.fetch("Retry")
            # a second broker in the route that nothing answers at
            route.queue_datas.append(QueueData("broker-dead", 4, 4))
            route.broker_datas.append(BrokerData("c", "broker-dead", {0: "127.0.0.1:1"}))
            routes.brokers["broker-dead"] = "127.0.0.1:1"
            routes._publish.pop("Retry", None)
            results = [await producer.send(Message("Retry", b"r%d" % i)) for i in range(12)]
            assert {r.queue.broker_name for r in results} == {"broker-a"}
            assert routes.brokers["broker-a"] == real
    run(main())


def test_namesrv_addr_from_the_environment(broker, monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", broker.namesrv)
    async def main():
        async with Producer(group="PG") as producer:
            assert (await producer.send(Message("Env", b"x"))).status is SendStatus.SEND_OK
    run(main())
    monkeypatch.delenv("NAMESRV_ADDR")
    with pytest.raises(ClientError, match="NAMESRV_ADDR"):
        Producer(group="PG")


def test_many_sends_in_flight_at_once(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            results = await asyncio.gather(*(producer.send(Message("Flight", b"%d" % i))
                                             for i in range(500)))
            assert all(r.status is SendStatus.SEND_OK for r in results)
            assert len({r.msg_id for r in results}) == 500
    run(main())


def test_delay_level_and_deliver_at_hold_messages_back(broker):
    """A scheduled message is stored again when it becomes due: its store time tells."""
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            await producer.send(Message("Later", b"now"))
            sent_at = time.time()
            await producer.send(Message("Later", b"level", delay_level=1))  # 1 s in this config
            await producer.send(Message("Later", b"at", deliver_at=sent_at + 1.5))
        got = {m.body: m for m in await read_all(broker.namesrv, "Later", 3)}
        level, at = got[b"level"], got[b"at"]
        assert level.store_timestamp - level.born_timestamp >= 1000
        assert at.store_timestamp >= int((sent_at + 1.5) * 1000) - 50
        assert got[b"now"].store_timestamp - got[b"now"].born_timestamp < 1000
    run(main())
