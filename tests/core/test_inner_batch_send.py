"""A remoting batch send flagged INNER_BATCH_FLAG (`Broker.put_inner_batch_send`, the Spark
sink's lane): one record batch stored whole as one CommitLog record, each record its own
message with its own offset; checked before anything is stored; each record's tag in the
ConsumeQueue and each record's UNIQ_KEY in the index, as a consumer sees the message."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from rocketport.client import AdminClient, Producer, PullConsumer
from rocketport.client.errors import ClientError
from rocketport.common.batch import Record, build_batch
from rocketport.common.message import PROPERTY_DEDUP_KEY
from rocketport.core.broker import Broker
from rocketport.core.config import ProtocolConfig
from rocketport.core.errors import InvalidMessage
from rocketport.core.facade.types import compile_filter
from tests.support.live_broker import start_live_broker
from tests.support.remoting import free_port

HOST = ("127.0.0.1", 1)


def _batch(n: int, *, ids: list[bytes] | None = None, **kwargs) -> bytes:
    records = [Record(i, 0, b"k%d" % i if i % 2 else None, b"v%d" % i,
                      [("TAGS", b"hot" if i % 3 == 0 else b"cold"), ("n", b"%d" % i)]
                      + ([("UNIQ_KEY", ids[i])] if ids else []))
               for i in range(n)]
    return build_batch(records, base_timestamp=1_700_000_000_000, **kwargs)


def test_one_record_many_messages_with_their_tags_and_ids(small_config):
    ids = [b"%032X" % (0xABC0 + i) for i in range(10)]
    odd = [b"short-%d" % i for i in range(10)]  # not RocketMQ's 32-character shape: decoded

    async def main():
        async with Broker(small_config) as broker:
            first = await broker.put_inner_batch_send("T", 1, _batch(10, ids=ids), {}, 0, HOST)
            second = await broker.put_inner_batch_send("T", 1, _batch(10, ids=odd), {}, 0, HOST)
            assert (first.queue_offset, first.count, second.queue_offset) == (0, 10, 10)
            msgs = list(broker.get_messages("T", 1, 0, 100).messages())
            assert [m.queue_offset for m in msgs] == list(range(20))
            assert len({m.commit_log_offset for m in msgs}) == 2  # one record a batch
            assert [(m.body, m.tags, m.keys) for m in msgs[:3]] == [
                (b"v0", "hot", []), (b"v1", "cold", ["k1"]), (b"v2", "cold", [])]
            hot = list(broker.get_messages("T", 1, 0, 100, message_filter=compile_filter("TAG", "hot")).messages())
            assert [m.body for m in hot] == [b"v%d" % i for i in range(10) if i % 3 == 0] * 2
            for uniq in (ids[7], odd[7]):
                found = broker.message_by_unique_key("T", uniq.decode())
                assert (found.body, found.uniq_key) == (b"v7", uniq.decode())
    asyncio.run(main())


@pytest.mark.parametrize("change, error", [
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC32C"),
    (lambda b: b[:-2], "length"),
    (lambda b: _batch(3, transactional=True, producer_id=7, producer_epoch=0, base_sequence=0), "transactional"),
    (lambda b: _batch(3, producer_id=7, producer_epoch=0, base_sequence=0), "idempotent"),
])
def test_a_batch_the_store_must_not_keep_is_refused_unstored(small_config, change, error):
    async def main():
        async with Broker(small_config) as broker:
            await broker.put_inner_batch_send("T", 0, _batch(3), {}, 0, HOST)
            with pytest.raises(InvalidMessage, match=error):
                await broker.put_inner_batch_send("T", 0, change(_batch(3)), {}, 0, HOST)
            with pytest.raises(InvalidMessage, match="DEDUP_KEY"):
                await broker.put_inner_batch_send("T", 0, _batch(3), {"TAGS": "x"}, 0, HOST)
            assert len(list(broker.get_messages("T", 0, 0, 10).messages())) == 3  # the first batch only
    asyncio.run(main())


def test_the_native_client_sends_one_and_a_repeat_is_dropped(small_config):
    live = start_live_broker(replace(small_config, listen_port=free_port(), namesrv=ProtocolConfig(True, 0),
                                     kafka=ProtocolConfig(False, 0)))
    try:
        async def main():
            async with AdminClient(live.namesrv) as admin:
                await admin.create_topic("Inner", queue_nums=2)
            async with Producer(live.namesrv, "inner") as producer:
                mq = (await producer.runtime.routes.publish_queues("Inner"))[1]
                sent = await producer.send_inner_batch("Inner", _batch(5), queue=mq, dedup_key="u1")
                again = await producer.send_inner_batch("Inner", _batch(5), queue=mq, dedup_key="u1")
                assert (sent.queue_offset, again.queue_offset, again.offset_msg_id) == (0, 0, sent.offset_msg_id)
                with pytest.raises(ClientError, match="CRC32C"):
                    await producer.send_inner_batch("Inner", _batch(5)[:-1] + b"\x00", queue=mq)
            async with PullConsumer("inner-check", live.namesrv, consume_from="first") as consumer:
                consumer.assign([q for q in await consumer.queues("Inner") if q.queue_id == 1])
                got = []
                for _ in range(20):
                    got += await consumer.poll(timeout_s=0.2)
                    if len(got) >= 5:
                        break
                got += await consumer.poll(timeout_s=0.3)
            assert [(m.body, m.queue_offset, m.properties["n"], m.properties[PROPERTY_DEDUP_KEY]) for m in got] == [
                (b"v%d" % i, i, str(i), "u1") for i in range(5)]
        asyncio.run(main())
    finally:
        live.stop()


def test_a_chunk_of_values_each_with_its_id_alone_is_indexed_as_the_log_walk_indexes_it(small_config):
    """The Spark writer's chunk of values (keyless records whose one header is their
    UNIQ_KEY): no record has a tag, and each id is found as when the index builder reads
    the stored batch itself (the same batch stored through the Kafka path), across index
    files (small_config's hold 255 entries each)."""
    ids = [b"%032X" % (0x7F0000016A3B0000 + i) for i in range(600)]
    batch = build_batch([Record(i, 0, None, b"v%03d" % i, [("UNIQ_KEY", uid)]) for i, uid in enumerate(ids)],
                        base_timestamp=1_700_000_000_000)

    async def main():
        async with Broker(small_config) as broker:
            await broker.put_inner_batch_send("S", 0, batch, {PROPERTY_DEDUP_KEY: "w/0/0"}, 0, HOST)
            await broker.put_record_batch("K", 0, batch, len(ids))
            msgs = list(broker.get_messages("S", 0, 0, 1000).messages())
            assert [(m.body, m.uniq_key, m.tags) for m in msgs] == [
                (b"v%03d" % i, uid.decode(), None) for i, uid in enumerate(ids)]
            assert not list(broker.get_messages("S", 0, 0, 1000, message_filter=compile_filter("TAG", "v000")).messages())
            for topic in ("S", "K"):
                for i in range(0, len(ids), 37):
                    found = broker.message_by_unique_key(topic, ids[i].decode())
                    assert (found.body, found.queue_offset) == (b"v%03d" % i, i)
    asyncio.run(main())
