"""Producer deduplication by DEDUP_KEY (core/dedup.py): through the Broker facade for single
puts, decoded batches and remoting batch bodies, and with a real RocketMQ-protocol client."""

from __future__ import annotations

import asyncio
import struct

from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.common.message import PROPERTY_DEDUP_KEY, Message
from rocketport.core.broker import Broker
from rocketport.core.dedup import DedupWindow
from rocketport.core.errors import MessageTooLarge
from rocketport.core.store.message_store import PutResult
from rocketport.core.store.record import topic_and_properties


def keyed(topic: str, body: bytes, key: str | None, queue_id: int = 0) -> Message:
    props = {PROPERTY_DEDUP_KEY: key} if key else {}
    return Message(topic, body, props, queue_id=queue_id)


def bodies(broker: Broker, topic: str, queue_id: int = 0) -> list[bytes]:
    return [m.body for m in broker.get_messages(topic, queue_id, 0, 100).messages()]


def test_single_puts_once_per_key_and_topic(small_config):
    async def main():
        async with Broker(small_config) as broker:
            first = await broker.put_message(keyed("D", b"a", "k1"))
            again = await broker.put_message(keyed("D", b"a", "k1"))
            assert (again.queue_id, again.queue_offset) == (first.queue_id, first.queue_offset)
            await broker.put_message(keyed("D", b"b", "k2"))
            await broker.put_message(keyed("D", b"c", None))
            await broker.put_message(keyed("D", b"c", None))  # no key: stored every time
            await broker.put_message(keyed("E", b"a", "k1"))  # another topic: its own keys
            assert bodies(broker, "D") == [b"a", b"b", b"c", b"c"]
            assert bodies(broker, "E") == [b"a"]
            assert broker.dedup.dropped == 1
    asyncio.run(main())


def test_batches_drop_stored_keys_and_keep_units(small_config):
    async def main():
        async with Broker(small_config) as broker:
            await broker.put_messages([keyed("B", b"1", "x"), keyed("B", b"2", "y")])
            # a key shared inside one put names a unit (z: two messages); x is a repeat
            result = await broker.put_messages([keyed("B", b"1", "x"), keyed("B", b"3", "z"),
                                                keyed("B", b"3", "z")])
            assert result.count == 2
            await broker.put_messages([keyed("B", b"3", "z"), keyed("B", b"3", "z")])
            # a remoting batch body takes the same path (its fast lane declines keyed bodies)
            body = encode_batch([BatchMessage(b"2", {PROPERTY_DEDUP_KEY: "y"}),
                                 BatchMessage(b"4", {PROPERTY_DEDUP_KEY: "w"})])
            await broker.put_batch("B", 0, body, 0, 0, ("127.0.0.1", 1), 0)
            every = await broker.put_batch("B", 0, body, 0, 0, ("127.0.0.1", 1), 0)  # all repeats
            # answered as the put that stored its first key ("y": the first batch) was
            assert (every.queue_offset, every.count) == (0, 2)
            assert bodies(broker, "B") == [b"1", b"2", b"3", b"3", b"4"]
    asyncio.run(main())


def _entry(body: bytes, properties: bytes) -> bytes:
    """One MessageBatch entry with its properties encoded as given."""
    return (struct.pack(">iiiii", 22 + len(body) + len(properties), 0, 0, 0, len(body)) + body
            + struct.pack(">h", len(properties)) + properties)


def stored_properties(broker: Broker, topic: str) -> list[bytes]:
    """Each stored record's encoded properties, as the CommitLog holds them."""
    return [topic_and_properties(broker.store.commitlog.record_at(m.commit_log_offset))[2]
            for m in broker.get_messages(topic, 0, 0, 100).messages()]


def test_a_batch_body_naming_one_key_is_a_unit_stored_as_sent(small_config):
    # properties a decode and encode would rewrite (no trailing separator): kept as sent
    raws = [b"n\x01%d\x02DEDUP_KEY\x01u" % i for i in range(20)]
    body = b"".join(_entry(b"u%d" % i, raw) for i, raw in enumerate(raws))
    other = b"".join(_entry(b"v%d" % i, b"DEDUP_KEY\x01v\x02") for i in range(3))

    async def main():
        async with Broker(small_config) as broker:
            first = await broker.put_batch("U", 0, body, 0, 0, ("127.0.0.1", 1), 0)
            again = await broker.put_batch("U", 0, body, 0, 0, ("127.0.0.1", 1), 0)
            assert (again.queue_offset, again.count, again.msg_ids) == (0, 20, first.msg_ids)
            # two sends of one new key at once: the second waits for the first, then drops
            both = await asyncio.gather(*(broker.put_batch("U", 0, other, 0, 0, ("127.0.0.1", 1), 0)
                                          for _ in range(2)))
            assert [(r.queue_offset, r.count) for r in both] == [(20, 3), (20, 3)]
            assert bodies(broker, "U") == [b"u%d" % i for i in range(20)] + [b"v0", b"v1", b"v2"]
            assert stored_properties(broker, "U") == raws + [b"DEDUP_KEY\x01v\x02"] * 3
            assert broker.dedup.dropped == 23
    asyncio.run(main())


def test_a_refused_put_does_not_keep_its_key(small_config):
    cfg = small_config.with_overrides(max_message_size=4096)

    async def main():
        async with Broker(cfg) as broker:
            try:
                await broker.put_message(keyed("R", b"x" * 5000, "big"))
            except MessageTooLarge:
                pass
            await broker.put_message(keyed("R", b"ok", "big"))
            assert bodies(broker, "R") == [b"ok"]
    asyncio.run(main())


def test_concurrent_puts_of_one_key_store_it_once():
    async def main():
        window = DedupWindow(capacity=2)
        stored: list[list[bytes]] = []
        gate = asyncio.Event()

        async def store(msgs):
            await gate.wait()
            stored.append([m.body for m in msgs])
            return PutResult(0, len(stored) - 1, len(stored) * 100, 100, 0)

        puts = [asyncio.create_task(window.put([keyed("T", b"m", "k")], store)) for _ in range(3)]
        await asyncio.sleep(0)
        gate.set()
        assert [r.queue_offset for r in await asyncio.gather(*puts)] == [0, 0, 0]
        assert stored == [[b"m"]]
        # the window keeps `capacity` keys: the oldest goes first
        for key in ("a", "b"):
            await window.put([keyed("T", b"m", key)], store)
        assert ("T", "k") not in window and ("T", "a") in window and ("T", "b") in window
    asyncio.run(main())
