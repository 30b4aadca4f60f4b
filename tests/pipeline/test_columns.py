"""Pulled bytes to Arrow columns (`pipeline/columns.py`) give the rows the client's own
decoder gives for the same pulls: tags, keys, the sharding key, every property, a body the
producer compressed, IPv6 hosts, messages without a producer id (offset message ids)."""

from __future__ import annotations

import zlib

from rocketport.client import Message as ClientMessage
from rocketport.client.message import MessageExt
from rocketport.common.message import COMPRESSED_FLAG, Message
from rocketport.pipeline.columns import to_batch
from rocketport.pipeline.plan import queue_key
from rocketport.pipeline.remote import Link, subscription
from rocketport.pipeline.schema import PROPERTY_KEY, RowBuffer
from rocketport.protocols.remoting.messages import unpack_message_ext_records
from tests.pipeline.conftest import create_topic, produce

TOPIC = "SparkColumns"


def client_rows(body: bytes, broker_name: str, end: int, tags=None) -> list[dict]:
    rows = RowBuffer()
    for raw in unpack_message_ext_records(body):
        m = MessageExt(raw, broker_name)
        if m.queue_offset < end and (tags is None or m.tags in tags):
            rows.add(TOPIC, m.queue_id, m.queue_offset, m.body, dict(m.properties), m.born_timestamp,
                     m.store_timestamp, m.msg_id, m.reconsume_times)
    return rows.take().to_pylist()


def test_columns_equal_the_clients_decoding(broker):
    create_topic(broker, TOPIC, 1)
    produce(broker, [ClientMessage(TOPIC, b"c%d" % i, tags=["A", "B", None][i % 3],
                                   keys=[f"k{i}", "", "x"] if i % 2 else None,
                                   properties={"n": str(i), **({PROPERTY_KEY: f"s{i}"} if i % 5 == 0 else {})})
                     for i in range(300)])
    produce(broker, [ClientMessage(TOPIC, b"big" * 3000, tags="A")])  # compressed by the client

    async def put_raw() -> None:
        b = broker.server.broker
        await b.put_message(Message(TOPIC, b"no id", {"TAGS": "B"}, queue_id=0))
        await b.put_message(Message(TOPIC, zlib.compress(b"z" * 50), {"TAGS": "A"}, queue_id=0,
                                    sys_flag=COMPRESSED_FLAG))
        await b.put_message(Message(TOPIC, b"v6", {"KEYS": "a b"}, queue_id=0, born_host=("::1", 7)))
    broker.call(put_raw)

    with Link(broker.namesrv) as link:
        (mq,) = link.queues(TOPIC)
        addr = link.broker_addr(mq)
        total = link.max_offsets([mq])[0]
        assert total == 304
        for tags in (None, "A || B"):
            sub = subscription(TOPIC, tags, None)
            answers = link.answers(link.send_pulls(addr, mq, [(0, 1024)], sub))
            body = answers[0][2]
            for end in (total, 150):
                want = client_rows(body, mq.broker_name, end, sub.tags)
                got = to_batch(body, TOPIC, mq.queue_id, end, sub.tags).to_pylist()
                assert got == want, queue_key(mq)
                if tags is None and end == total:
                    every = got
    assert len(every) == 304
    by_value = {r["value"]: r for r in every}
    assert by_value[b"z" * 50]["tags"] == "A" and by_value[b"big" * 3000]["tags"] == "A"
    assert len(by_value[b"no id"]["msg_id"]) == 32 and by_value[b"v6"]["keys"] == ["a", "b"]
    assert by_value[b"c5"]["key"] == "s5" and by_value[b"c5"]["keys"] == ["k5", "x"]
