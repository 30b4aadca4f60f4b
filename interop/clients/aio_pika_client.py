"""aio-pika: the asyncio AMQP 0-9-1 client (over aiormq), on a fresh event loop per call."""

from __future__ import annotations

import asyncio
import time
from importlib import metadata

import aio_pika

from ..base import Client, Consume, In, Out
from . import amqp_common as ac


class AioPika(Client):
    name = "aio-pika"
    protocol = "amqp"
    fields = ac.FIELDS
    lacks = dict(ac.LACKS)
    precreate = False

    def version(self) -> str:
        return metadata.version("aio-pika")

    async def _connect(self) -> aio_pika.abc.AbstractConnection:
        host, port = self.ep.split(self.ep.amqp)
        login, password = (self.creds.user, self.creds.secret) if self.creds else ("guest", "guest")
        return await aio_pika.connect(host=host, port=port, login=login, password=password, timeout=10)

    def prepare(self, topic: str, group: str, c: Consume) -> None:
        async def run() -> None:
            async with await self._connect() as conn:
                ch = await conn.channel()
                ex = await ch.declare_exchange(topic, aio_pika.ExchangeType.TOPIC, durable=True)
                q = await ch.declare_queue(group, durable=True)
                for key in ac.binding_keys(c):
                    await q.bind(ex, key)
        asyncio.run(asyncio.wait_for(run(), 60))

    @staticmethod
    async def _publish(ex, msgs: list[Out]) -> None:
        for m in msgs:
            await ex.publish(aio_pika.Message(m.body, headers=ac.headers(m),
                                              delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                             routing_key=ac.routing_key(m))

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        async def run() -> None:
            async with await self._connect() as conn:
                ch = await conn.channel(publisher_confirms=True)
                ex = await ch.declare_exchange(topic, aio_pika.ExchangeType.TOPIC, durable=True)
                if len(msgs) > 100:  # the burst: 500 publishes awaiting their confirms at once
                    for i in range(0, len(msgs), 500):
                        await asyncio.gather(*(self._publish(ex, [m]) for m in msgs[i:i + 500]))
                else:
                    await self._publish(ex, msgs)
        asyncio.run(asyncio.wait_for(run(), 240))

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        async def run() -> None:
            async with await self._connect() as conn:
                ch = await conn.channel(publisher_confirms=False)
                ex = await ch.declare_exchange(topic, aio_pika.ExchangeType.TOPIC, durable=True)
                tx = ch.transaction()
                await tx.select()
                await self._publish(ex, commit)
                await tx.commit()
                await self._publish(ex, abort)
                await tx.rollback()
        asyncio.run(asyncio.wait_for(run(), 60))

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        got: list[In] = []
        last: list[float | None] = [None]

        async def on_message(msg: aio_pika.abc.AbstractIncomingMessage) -> None:
            if c.n is not None and len(got) >= c.n:
                return  # unacknowledged: back to the queue at close
            got.append(ac.received(msg.body, msg.routing_key, msg.headers, msg.redelivered))
            last[0] = time.monotonic()
            if c.nack:
                await msg.nack(requeue=False)
            else:
                await msg.ack()

        async def run() -> None:
            async with await self._connect() as conn:
                ch = await conn.channel()
                await ch.set_qos(prefetch_count=100)
                q = await ch.get_queue(group, ensure=False)
                tag = await q.consume(on_message)
                if c.ready is not None:
                    c.ready.set()
                started = time.monotonic()
                while not c.done(len(got), started, last[0]):
                    await asyncio.sleep(0.05)
                await q.cancel(tag)
        asyncio.run(run())
        return got


CLIENT = AioPika
