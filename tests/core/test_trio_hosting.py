"""The broker runs on asyncio but can be hosted inside a Trio program via trio-asyncio."""

import trio
import trio_asyncio

from rocketport.core.broker import Broker
from rocketport.core.message import Message


def test_broker_inside_trio(small_config):
    async def trio_main():
        async with trio_asyncio.open_loop():
            broker = Broker(small_config)
            await trio_asyncio.aio_as_trio(broker.start)()
            try:
                async with trio.open_nursery() as nursery:
                    for i in range(5):
                        nursery.start_soon(trio_asyncio.aio_as_trio(broker.put_message),
                                           Message("Trio", f"m{i}".encode(), queue_id=0))
                res = broker.get_messages("Trio", 0, 0, 10)
                assert sorted(m.body for m in res.messages()) == [f"m{i}".encode() for i in range(5)]
            finally:
                await trio_asyncio.aio_as_trio(broker.stop)()

    trio.run(trio_main)
