"""The plain-send lane (`Broker.put_plain`) through the facade: what the lane takes is stored
at once in order, what it refuses is stored by `PlainPut.later` after it in order, and
under SYNC_FLUSH the answers are handed the one fsync future that covers them."""

from __future__ import annotations

import asyncio

from rocketport.common.message import encode_properties
from rocketport.core.broker import Broker
from rocketport.core.errors import MessageTooLarge
from rocketport.core.facade.types import PlainSend

HOST = ("127.0.0.1", 1)


def _bodies(broker: Broker, topic: str) -> list[bytes]:
    out: list[bytes] = []
    for queue_id in range(broker.get_topic(topic).read_queue_nums):
        got = broker.get_messages(topic, queue_id, 0, 1000)
        out += [m.body for m in got.messages()]
    return out


def test_the_lane_stores_what_it_takes_and_leaves_the_rest_to_later_in_order(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("Known", read_queue_nums=1, write_queue_nums=1)
            props = encode_properties({"TAGS": "a"})
            sends = [PlainSend("Known", -1, props, [b"k1", b"k2"], HOST),
                     PlainSend("Fresh", -1, props, [b"f1"], HOST),  # to auto-create: refused
                     PlainSend("Known", -1, props, [b"k3"], HOST)]
            put = broker.put_plain(sends, durable=True)
            assert len(put.stored) == 1 and put.stored[0][0] == 0  # the first send, at once
            assert put.durable is None  # ASYNC_FLUSH: nothing to wait for
            assert _bodies(broker, "Known") == [b"k1", b"k2"]
            results = await put.later  # the refused send and every one after it
            assert [r.queue_offset for r in results] == [0, 2]
            assert _bodies(broker, "Known") == [b"k1", b"k2", b"k3"]
            assert _bodies(broker, "Fresh") == [b"f1"]
            # a send too large is refused alone; the others are stored
            big = b"x" * (small_config.max_message_size + 1)
            put = broker.put_plain([PlainSend("Known", -1, b"", [big], HOST),
                                    PlainSend("Known", -1, b"", [b"k4"], HOST)])
            assert isinstance(put.stored[0], MessageTooLarge) and put.stored[1][0] == 3
            assert put.later is None
    asyncio.run(main())


def test_under_sync_flush_the_lane_hands_back_the_covering_fsync(small_config):
    config = small_config.with_overrides(flush_disk_type="SYNC_FLUSH")

    async def main():
        async with Broker(config) as broker:
            broker.create_topic("S", read_queue_nums=1, write_queue_nums=1)
            put = broker.put_plain([PlainSend("S", -1, b"", [b"a", b"b"], HOST)], durable=True)
            assert type(put.stored[0]) is tuple and put.durable is not None
            await put.durable
            # without a wait asked for, none is handed back (a STOMP SEND without receipt)
            assert broker.put_plain([PlainSend("S", -1, b"", [b"c"], HOST)]).durable is None
            assert _bodies(broker, "S") == [b"a", b"b", b"c"]
    asyncio.run(main())
