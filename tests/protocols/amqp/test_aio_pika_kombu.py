"""aio-pika (asyncio, aiormq/pamqp underneath) and kombu (its own py-amqp transport), unchanged."""

from __future__ import annotations

import asyncio

import aio_pika
import kombu


def test_aio_pika_confirms_headers_exchange_prefetch_nack_and_rpc(amqp_port):
    async def main() -> None:
        url = f"amqp://guest:guest@127.0.0.1:{amqp_port}/"
        conn = await aio_pika.connect_robust(url)
        async with conn:
            ch = await conn.channel(publisher_confirms=True)
            await ch.set_qos(prefetch_count=3)
            ex = await ch.declare_exchange("aio-headers", aio_pika.ExchangeType.HEADERS)
            q = await ch.declare_queue("", exclusive=True)
            await q.bind(ex, arguments={"x-match": "any", "kind": "invoice"})
            for i in range(6):
                await ex.publish(aio_pika.Message(b"m-%d" % i, headers={"kind": "invoice" if i % 2 else "memo"},
                                                  delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key="")
            bodies, redelivered = [], []
            async with q.iterator() as messages:
                async for message in messages:
                    if message.body == b"m-1" and not message.redelivered:
                        await message.nack(requeue=True)
                        continue
                    await message.ack()
                    bodies.append(message.body)
                    redelivered.append(message.redelivered)
                    if len(bodies) == 3:
                        break
            assert sorted(bodies) == [b"m-1", b"m-3", b"m-5"]
            assert sum(redelivered) == 1

            # RPC: a server on the default exchange answers to reply_to with the correlation id
            requests = await ch.declare_queue("aio-rpc")

            async def serve(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                async with message.process():
                    await ch.default_exchange.publish(
                        aio_pika.Message(message.body[::-1], correlation_id=message.correlation_id),
                        routing_key=message.reply_to)
            await requests.consume(serve)
            replies = await ch.declare_queue("", exclusive=True)
            await ch.default_exchange.publish(aio_pika.Message(b"abc", reply_to=replies.name, correlation_id="r1"),
                                              routing_key="aio-rpc")
            answer = None
            for _ in range(100):
                answer = await replies.get(no_ack=True, fail=False)
                if answer is not None:
                    break
                await asyncio.sleep(0.05)
            assert answer is not None and answer.body == b"cba" and answer.correlation_id == "r1"

    asyncio.run(asyncio.wait_for(main(), 30))


def test_kombu_producer_consumer_and_simple_queue(amqp_port):
    url = f"amqp://guest:guest@127.0.0.1:{amqp_port}//"
    exchange = kombu.Exchange("kombu-tasks", type="direct", durable=True)
    queue = kombu.Queue("kombu-work", exchange, routing_key="work")
    with kombu.Connection(url, transport="pyamqp", connect_timeout=10) as conn:
        producer = conn.Producer(serializer="json")
        for i in range(5):
            producer.publish({"n": i}, exchange=exchange, routing_key="work", declare=[queue],
                             headers={"task": "add"}, retry=False)
        got = []

        def on_message(body, message):
            got.append((body, message.headers))
            message.ack()
        with conn.Consumer(queue, callbacks=[on_message], prefetch_count=2):
            for _ in range(50):
                if len(got) == 5:
                    break
                try:
                    conn.drain_events(timeout=0.5)
                except TimeoutError:
                    pass
        assert [b["n"] for b, _ in got] == list(range(5))
        assert got[0][1]["task"] == "add"
        simple = conn.SimpleQueue("kombu-simple")
        simple.put({"hello": "world"})
        message = simple.get(block=True, timeout=10)
        assert message.payload == {"hello": "world"}
        message.ack()
        simple.close()
