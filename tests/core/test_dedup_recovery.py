"""The producer dedup window outlives what it keeps in memory: a key forgotten by the window,
or stored before a restart or a SIGKILL, is recalled from the log (through the key index),
so a writer's replay is still dropped. In-process through the Broker facade, and with a
real broker process killed right after its answer, written to by the native client's batch
sends, and by its inner-batch sends (one record batch a chunk) as the Spark sink writes
(pipeline/writer.py)."""

from __future__ import annotations

import asyncio
import re

import pytest

from rocketport.client import AdminClient
from rocketport.client import Message as ClientMessage
from rocketport.client import Producer, PullConsumer
from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.common.message import PROPERTY_DEDUP_KEY, Message
from rocketport.core.broker import Broker
from tests.support.processes import start_broker, stop, wait_ready


def keyed(topic: str, body: bytes, key: str) -> Message:
    return Message(topic, body, {PROPERTY_DEDUP_KEY: key}, queue_id=0)


def bodies(broker: Broker, topic: str) -> list[bytes]:
    return [m.body for m in broker.get_messages(topic, 0, 0, 100).messages()]


def test_a_key_the_window_forgot_is_recalled_from_the_log(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.dedup.capacity = 2
            first = await broker.put_messages([keyed("F", b"a1", "a"), keyed("F", b"a2", "a")])
            for key in "bcd":  # "a" leaves memory
                await broker.put_message(keyed("F", key.encode(), key))
            assert ("F", "a") not in broker.dedup
            again = await broker.put_messages([keyed("F", b"a1", "a"), keyed("F", b"a2", "a")])
            # answered as the put that stored it was: both records, from their first offset
            assert (again.queue_offset, again.count) == (first.queue_offset, 2)
            assert again.msg_ids == first.msg_ids
            await broker.put_message(keyed("F", b"e", "e"))  # a new key: stored
            assert bodies(broker, "F") == [b"a1", b"a2", b"b", b"c", b"d", b"e"]
            assert broker.dedup.recalled == 1
    asyncio.run(main())


def test_keys_stored_before_a_restart_are_recalled(small_config):
    async def main():
        async with Broker(small_config) as broker:
            await broker.put_message(keyed("R", b"x", "x"))
            await broker.put_message(keyed("Other", b"y", "y"))
        async with Broker(small_config) as broker:
            await broker.put_message(keyed("R", b"x", "x"))  # a repeat
            await broker.put_message(keyed("R", b"y", "y"))  # another topic's key: new here
            await broker.put_message(keyed("R", b"y", "y"))  # and now a repeat in memory
            assert bodies(broker, "R") == [b"x", b"y"]
            assert broker.dedup.dropped == 2
    asyncio.run(main())


def test_a_batch_unit_is_recalled_whole_after_a_restart(small_config):
    """The index holds the first record of a unit's run; the recall reads the rest on."""
    body = encode_batch([BatchMessage(b"%d" % i, {PROPERTY_DEDUP_KEY: "unit"}) for i in range(30)])
    lone = encode_batch([BatchMessage(b"lone", {PROPERTY_DEDUP_KEY: "unit"})])

    async def main():
        async with Broker(small_config) as broker:
            await broker.put_message(keyed("B", b"before", "other"))
            first = await broker.put_batch("B", 0, body, 0, 0, ("127.0.0.1", 1), 0)
            await broker.put_message(keyed("B", b"after", "other2"))
        async with Broker(small_config) as broker:
            again = await broker.put_batch("B", 0, body, 0, 0, ("127.0.0.1", 1), 0)
            assert (again.queue_offset, again.count, again.msg_ids) == (1, 30, first.msg_ids)
            assert (await broker.put_batch("B", 0, lone, 0, 0, ("127.0.0.1", 1), 0)).count == 30
            assert broker.dedup.recalled == 1
            assert bodies(broker, "B") == [b"before", *(b"%d" % i for i in range(30)), b"after"]
    asyncio.run(main())


def _record_batch(values: list[bytes]) -> bytes:
    return build_batch([Record(i, 0, None, v, [("TAGS", b"t")]) for i, v in enumerate(values)],
                       base_timestamp=1_700_000_000_000)


def test_an_inner_batch_unit_is_recalled_after_a_restart(small_config):
    """A record batch stored whole under its DEDUP_KEY (the Spark sink's chunk): indexed by
    that key, recalled after a restart and answered with the whole batch's count."""
    batch = _record_batch([b"%d" % i for i in range(20)])
    host = ("127.0.0.1", 1)

    async def main():
        async with Broker(small_config) as broker:
            first = await broker.put_inner_batch_send("I", 0, batch, {PROPERTY_DEDUP_KEY: "c0"}, 0, host)
            await broker.put_message(keyed("I", b"after", "other"))
        async with Broker(small_config) as broker:
            again = await broker.put_inner_batch_send("I", 0, batch, {PROPERTY_DEDUP_KEY: "c0"}, 0, host)
            assert (again.queue_offset, again.count, again.msg_id) == (0, 20, first.msg_id)
            assert broker.dedup.recalled == 1
            await broker.put_inner_batch_send("I", 0, batch, {PROPERTY_DEDUP_KEY: "c1"}, 0, host)
            assert bodies(broker, "I") == [*(b"%d" % i for i in range(20)), b"after",
                                           *(b"%d" % i for i in range(20))]
    asyncio.run(main())


# ---------------------------------------------------------------- a real process, SIGKILLed
_SETTINGS = ("listenPort=0", "namesrv.port=0", "kafka.enabled=false")
TOPIC = "SinkReplay"
CHUNKS, CHUNK = 12, 50  # batch sends, messages in each (one DEDUP_KEY a chunk, as the sink)


def _namesrv(log: str) -> str:
    return "127.0.0.1:" + re.search(r"name server listening on 127\.0\.0\.1:(\d+)", log).group(1)


def _sink_batch(values: list[bytes], chunk: int) -> bytes:
    """What the Spark sink sends for a chunk of values: keyless records of equal-size values,
    each with its own UNIQ_KEY as its one header (the broker hands the ids to its index
    builder instead of letting it read them: IndexService.inner_ids)."""
    return build_batch([Record(i, 0, None, v, [("UNIQ_KEY", b"%032X" % (chunk << 16 | i))])
                        for i, v in enumerate(values)], base_timestamp=1_700_000_000_000)


async def _write(namesrv: str, chunks: range, inner: bool) -> None:
    """The sink's shape: each chunk one batch send to one queue, named writer/epoch/queue/chunk
    (``inner``: one record batch stored whole, as the sink sends them)."""
    async with Producer(namesrv, "sink", send_timeout_s=10) as producer:
        queues = await producer.runtime.routes.publish_queues(TOPIC)
        for n in chunks:
            mq = queues[n % len(queues)]
            key = f"w1/0/{mq.broker_name}:{mq.queue_id}/{n}"
            values = [b"%03d-%03d" % (n, i) for i in range(CHUNK)]
            if inner:
                await producer.send_inner_batch(TOPIC, _sink_batch(values, n), queue=mq, dedup_key=key)
            else:
                await producer.send_batch([ClientMessage(TOPIC, v, properties={PROPERTY_DEDUP_KEY: key})
                                           for v in values], queue=mq)


async def _stored(namesrv: str) -> tuple[int, list[bytes]]:
    """(messages stored in the topic by its queues' max offsets, every body read back)."""
    async with PullConsumer("reader", namesrv, consume_from="first") as consumer, \
            AdminClient(namesrv) as admin:
        queues = await consumer.queues(TOPIC)
        total = sum([await admin.max_offset(mq) for mq in queues])
        consumer.assign(queues)
        got: list[bytes] = []
        for _ in range(200):
            if len(got) >= total:
                break
            got += [m.body for m in await consumer.poll(timeout_s=0.2, max_messages=1000)]
        return total, got


@pytest.mark.parametrize("inner", [False, True], ids=["batch_sends", "inner_batches"])
def test_a_replay_after_a_sigkill_is_dropped(tmp_path, inner):
    root = tmp_path / "store"
    proc = start_broker(root, *_SETTINGS)
    try:
        namesrv = _namesrv(wait_ready(proc))
        asyncio.run(_write(namesrv, range(CHUNKS), inner))
    finally:
        proc.kill()  # SIGKILL right after the last answer
        proc.wait()
    again = start_broker(root, *_SETTINGS)
    try:
        log = wait_ready(again)
        assert "after a crash" in log
        namesrv = _namesrv(log)
        # the replay: every chunk again, under the same keys, and two chunks never sent
        asyncio.run(_write(namesrv, range(CHUNKS + 2), inner))
        total, got = asyncio.run(_stored(namesrv))
        expected = sorted(b"%03d-%03d" % (n, i) for n in range(CHUNKS + 2) for i in range(CHUNK))
        assert total == len(expected)
        assert sorted(got) == expected
    finally:
        stop(again)
