"""The built-in queue selectors (as RocketMQ's Java client picks) and the callback form of
async send, against a live broker where a send is involved."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from rocketport.client import (
    ClientError,
    Message,
    MessageQueue,
    Producer,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
    SendResult,
    SendStatus,
)
from rocketport.client import sync
from rocketport.protocols.remoting import ResponseCode
from tests.support.aio import run

from .test_producer import read_all

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(4)]
MSG = Message("T", b"x")


@pytest.mark.parametrize("key, java_hash_code", [
    # String.hashCode() and Long.hashCode() as a JVM printed them
    ("hello", 99162322), ("order-1", -1207111310), ("polygenelubricants", -2147483648),
    ("zzzzzzzzzz", -1580979136), ("\u00e9t\u00e9\U0001F600", 220632961), ("", 0),
    ((1 << 40) | 12345, 12601), (-5000000000, 705032702), (-7, -7)])
def test_hash_selector_picks_the_queue_java_picks(key, java_hash_code):
    # SelectMessageQueueByHash: value = hashCode % size; if (value < 0) value = abs(value)
    java_index = abs(int(java_hash_code % 4 if java_hash_code >= 0 else -(-java_hash_code % 4)))
    assert SelectMessageQueueByHash()(QUEUES, MSG, key) == QUEUES[java_index]


def test_hash_selector_refuses_keys_without_a_stable_hash():
    with pytest.raises(ClientError):
        SelectMessageQueueByHash()(QUEUES, MSG, 1.5)


def test_random_selector_picks_among_the_queues_given():
    picked = Counter(SelectMessageQueueByRandom()(QUEUES, MSG, None) for _ in range(400))
    assert set(picked) == set(QUEUES)


def test_machine_room_selector_keeps_to_the_named_rooms():
    queues = [MessageQueue("T", name, i) for name in ("hz@broker-a", "sh@broker-b", "broker-c")
              for i in range(2)]
    by_room = SelectMessageQueueByMachineRoom({"sh"})
    assert {by_room(queues, MSG, None) for _ in range(50)} == set(queues[2:4])
    assert by_room(queues, MSG, "order-1") == by_room(queues, MSG, "order-1")
    with pytest.raises(ClientError):
        SelectMessageQueueByMachineRoom({"bj"})(queues, MSG, None)


def test_hash_selector_keeps_each_key_on_one_queue_in_order(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            by_hash = SelectMessageQueueByHash()
            placed: dict[str, set[int]] = {}
            for step in range(5):
                for key in ("order-1", "order-2", "order-3", "order-4"):
                    result = await producer.send(Message("HashOrder", f"{key}:{step}".encode()),
                                                 selector=by_hash, arg=key)
                    placed.setdefault(key, set()).add(result.queue_id)
        assert all(len(ids) == 1 for ids in placed.values())
        got = await read_all(broker.namesrv, "HashOrder", 20)
        for key in placed:
            steps = [m.body.decode().split(":")[1] for m in got if m.body.startswith(key.encode())]
            assert steps == ["0", "1", "2", "3", "4"]
    run(asyncio.wait_for(main(), 60))


def test_send_async_calls_back_with_the_result_or_the_error(broker):
    async def main():
        results: list[SendResult] = []
        errors: list[ClientError] = []
        both = asyncio.Event()

        async def on_success(result: SendResult) -> None:  # a coroutine function
            results.append(result)
            if len(results) == 10 and errors:
                both.set()

        def on_exception(error: ClientError) -> None:  # a plain function
            errors.append(error)
            if len(results) == 10:
                both.set()

        async with Producer(broker.namesrv, "PG") as producer:
            for i in range(10):
                assert producer.send_async(Message("Callbacks", b"c%d" % i), on_success,
                                           on_exception) is None
            producer.send_async(Message("not a topic!", b"x"), on_success, on_exception)
            await asyncio.wait_for(both.wait(), 30)
            # past async_send_limit: refused at once, through on_exception
            producer.async_send_limit = 0
            producer.send_async(Message("Callbacks", b"refused"), on_success, on_exception)
            assert len(errors) == 2
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert errors[0].code == ResponseCode.MESSAGE_ILLEGAL
        got = await read_all(broker.namesrv, "Callbacks", 10)
        assert sorted(m.body for m in got) == sorted(b"c%d" % i for i in range(10))
        assert {m.msg_id for m in got} == {r.msg_id for r in results}
    run(asyncio.wait_for(main(), 60))


def test_shutdown_waits_for_callback_sends_under_way(broker):
    async def main():
        results: list[SendResult] = []
        async with Producer(broker.namesrv, "PG") as producer:
            for i in range(20):
                producer.send_async(Message("Drain", b"d%d" % i), results.append)
        assert len(results) == 20  # every callback ran before shutdown returned
    run(asyncio.wait_for(main(), 60))


def test_sync_send_async_runs_the_callbacks_in_a_thread(broker):
    done = threading.Event()
    seen: list[tuple[str, str]] = []

    def on_success(result):
        seen.append((result.status.name, threading.current_thread().name))
        done.set()

    with sync.Producer(broker.namesrv, "PG") as producer:
        producer.send_async(sync.Message("SyncCallbacks", b"s"), on_success)
        assert done.wait(30)
    [(status, thread)] = seen
    assert status == "SEND_OK" and thread != threading.current_thread().name
