"""Lookups find the records inside stored Kafka batches: by key (the record key is KEYS) and
by unique key (a UNIQ_KEY header, as a producer naming its messages as RocketMQ clients do
sends it), through the facade and through the remoting QUERY_MESSAGE a RocketMQ admin sends."""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer as ConfluentProducer

from rocketport.client import AdminClient
from tests.support.live_broker import LiveBroker

TOPIC = "lookups"
COUNT = 2000


def _produce(live: LiveBroker) -> None:
    live.run(lambda: live.server.broker.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1))
    producer = ConfluentProducer({"bootstrap.servers": live.bootstrap, "linger.ms": 50,
                                  "compression.type": "lz4"})
    for i in range(COUNT):
        producer.produce(TOPIC, value=b"v%d" % i, key=b"k%d" % i, partition=0,
                         headers=[("UNIQ_KEY", b"U%d" % i)])
    assert producer.flush(20) == 0


async def _admin_query(namesrv: str, key: str) -> list[tuple[bytes, int]]:
    async with AdminClient(namesrv) as admin:
        return [(m.body, m.queue_offset) for m in await admin.query_by_key(TOPIC, key)]


def test_records_inside_kafka_batches_are_found_by_key_and_unique_key(live_broker):
    _produce(live_broker)
    broker = live_broker.server.broker
    stored = live_broker.run(lambda: broker.get_messages(TOPIC, 0, 0, COUNT))
    assert stored.message_count == COUNT
    assert len(stored.segments) < COUNT // 10  # stored as batches of many records
    for i in (0, 1234, COUNT - 1):
        msg = live_broker.run(lambda i=i: broker.message_by_unique_key(TOPIC, f"U{i}"))
        assert (msg.body, msg.queue_offset, msg.keys) == (b"v%d" % i, i, [f"k{i}"])
        found = live_broker.run(lambda i=i: broker.query_by_key(TOPIC, f"k{i}"))
        assert [(m.body, m.queue_offset) for m in found] == [(b"v%d" % i, i)]
    assert asyncio.run(_admin_query(live_broker.namesrv, "U777")) == [(b"v777", 777)]
    assert asyncio.run(_admin_query(live_broker.namesrv, "k778")) == [(b"v778", 778)]
