"""Message TTL, dead-lettering with x-death, length limits and priorities as RabbitMQ
applications use them, through pika and aio-pika's RPC patterns (protocols/amqp/queue_limits.py,
dead_letter.py). The same behaviours are compared with a real RabbitMQ in
tests/parity/test_amqp_queue_parity.py."""

from __future__ import annotations

import asyncio
import datetime
import time

import aio_pika
import pika
import pytest
from aio_pika.patterns import RPC, JsonRPC
from pika.exceptions import NackError

from tests.protocols.amqp.conftest import amqp_config
from tests.protocols.amqp.test_pika import TIMEOUT, _connect, _drain, _get
from tests.support.aio import run
from tests.support.live_broker import start_live_broker


def _count(ch, queue: str) -> int:
    return ch.queue_declare(queue, passive=True).method.message_count


def _wait_count(ch, queue: str, wanted: int) -> int:
    deadline = time.monotonic() + TIMEOUT
    while (count := _count(ch, queue)) != wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    return count


def test_delayed_retry_pattern_counts_each_round_in_x_death(amqp_port):
    """A work queue dead-letters rejected jobs into a wait queue nobody consumes, whose
    x-message-ttl dead-letters them back: each round adds one to both x-death entries."""
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("jobs", "direct")
        ch.exchange_declare("jobs.wait", "direct")
        ch.queue_declare("jobs.work", arguments={"x-dead-letter-exchange": "jobs.wait"})
        ch.queue_bind("jobs.work", "jobs", "resize")
        ch.queue_declare("jobs.retry", arguments={"x-message-ttl": 50, "x-dead-letter-exchange": "jobs"})
        ch.queue_bind("jobs.retry", "jobs.wait", "resize")
        ch.basic_publish("jobs", "resize", b"image-1", pika.BasicProperties(
            headers={"attempt": "x", "size": 1024, "retry": True}, expiration="60000"))
        counts = []
        for _ in range(4):
            method, props, body = _get(ch, "jobs.work")
            assert body == b"image-1" and method.exchange == "jobs" and method.routing_key == "resize"
            assert (props.headers["size"], props.headers["retry"]) == (1024, True)  # typed, every round
            deaths = (props.headers or {}).get("x-death", [])
            counts.append([(d["queue"], d["reason"], d["count"]) for d in deaths])
            if deaths:
                first = deaths[0]
                assert first["exchange"] == "jobs.wait" and first["routing-keys"] == ["resize"]
                assert isinstance(first["time"], datetime.datetime)
                assert props.headers["x-first-death-reason"] == "rejected"
                assert props.headers["x-first-death-queue"] == "jobs.work"
                assert props.expiration is None  # kept in the rejected entry instead
                assert deaths[1]["original-expiration"] == "60000"
            ch.basic_reject(method.delivery_tag, requeue=False)
        assert counts == [[]] + [[("jobs.retry", "expired", n), ("jobs.work", "rejected", n)] for n in (1, 2, 3)]


def test_expired_messages_reach_the_dead_letter_exchange_with_no_consumer(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("parked", "fanout")
        ch.queue_declare("parked.all")
        ch.queue_bind("parked.all", "parked")
        ch.queue_declare("holding", arguments={"x-message-ttl": 100, "x-dead-letter-exchange": "parked",
                                               "x-dead-letter-routing-key": "timed-out"})
        for i in range(50):
            ch.basic_publish("", "holding", b"%d" % i)
        assert _wait_count(ch, "parked.all", 50) == 50
        assert _count(ch, "holding") == 0
        got = _drain(ch, "parked.all", 50)
        assert [b for _, _, b in got] == [b"%d" % i for i in range(50)]  # in order
        method, props, _ = got[0]
        assert method.routing_key == "timed-out" and method.exchange == "parked"
        (death,) = props.headers["x-death"]
        assert (death["queue"], death["reason"], death["count"], death["exchange"], death["routing-keys"]) == (
            "holding", "expired", 1, "", ["holding"])


def test_per_message_expiration_without_a_dead_letter_exchange_drops(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("brief")
        ch.basic_publish("", "brief", b"gone", pika.BasicProperties(expiration="50"))
        ch.basic_publish("", "brief", b"kept", pika.BasicProperties(expiration="600000"))
        assert _wait_count(ch, "brief", 1) == 1
        assert ch.basic_get("brief", auto_ack=True)[2] == b"kept"


def test_overflow_drop_head_reject_publish_and_reject_publish_dlx(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("overflowed", "fanout")
        ch.queue_declare("overflowed.all")
        ch.queue_bind("overflowed.all", "overflowed")
        outcomes = {}
        for mode in ("drop-head", "reject-publish", "reject-publish-dlx"):
            ch.queue_declare(f"cap.{mode}", arguments={"x-max-length": 2, "x-overflow": mode,
                                                       "x-dead-letter-exchange": "overflowed"})
            outcomes[mode] = []
            for i in range(4):
                try:
                    ch.basic_publish("", f"cap.{mode}", b"%s-%d" % (mode.encode(), i))
                    outcomes[mode].append("ack")
                except NackError:
                    outcomes[mode].append("nack")
            assert _count(ch, f"cap.{mode}") == 2
        assert outcomes == {"drop-head": ["ack"] * 4, "reject-publish": ["ack", "ack", "nack", "nack"],
                            "reject-publish-dlx": ["ack", "ack", "nack", "nack"]}
        assert [ch.basic_get("cap.drop-head", auto_ack=True)[2] for _ in range(3)] == [
            b"drop-head-2", b"drop-head-3", None]
        assert [ch.basic_get("cap.reject-publish", auto_ack=True)[2] for _ in range(3)] == [
            b"reject-publish-0", b"reject-publish-1", None]
        dead = _drain(ch, "overflowed.all", 4)
        assert sorted(b for _, _, b in dead) == [b"drop-head-0", b"drop-head-1",
                                                 b"reject-publish-dlx-2", b"reject-publish-dlx-3"]
        assert {p.headers["x-death"][0]["reason"] for _, p, _ in dead} == {"maxlen"}
        # a publisher without confirms: the refused publish is dropped, the channel stays open
        plain = conn.channel()
        plain.queue_declare("cap.one", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        for body in (b"first", b"dropped", b"dropped-too"):
            plain.basic_publish("", "cap.one", body)
        assert _get(plain, "cap.one")[2] == b"first"
        assert plain.basic_get("cap.one")[0] is None and plain.is_open


def test_priority_queue_hands_out_higher_priorities_first(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("ranked", arguments={"x-max-priority": 9})  # 200 counts as 9
        sent = [(b"low", 1), (b"none", None), (b"high", 9), (b"mid", 5), (b"high-2", 9), (b"over", 200)]
        for body, priority in sent:
            ch.basic_publish("", "ranked", body, pika.BasicProperties(priority=priority))
        ch.basic_qos(prefetch_count=1)
        got = [b for _, _, b in _drain(ch, "ranked", len(sent))]
        assert got == [b"high", b"high-2", b"over", b"mid", b"low", b"none"]


def test_aio_pika_rpc_and_json_rpc_time_out_through_dead_lettering_and_return_unroutable_calls(amqp_port):
    """aio_pika.patterns.RPC / JsonRPC: a call's expiration dead-letters it through rpc.dlx
    (a headers exchange) back to the caller as a timeout; a call to no queue comes back as
    basic.return (mandatory)."""
    async def main() -> None:
        conn = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{amqp_port}/")
        async with conn:
            for pattern in (RPC, JsonRPC):
                channel = await conn.channel()
                rpc = await pattern.create(channel)

                async def multiply(*, x: int, y: int) -> int:
                    return x * y
                await rpc.register(f"{pattern.__name__}.multiply", multiply, auto_delete=True)
                assert await rpc.call(f"{pattern.__name__}.multiply", kwargs={"x": 6, "y": 7}) == 42
                # a method whose worker is gone: its queue keeps rpc.dlx, nobody consumes
                await channel.declare_queue(f"{pattern.__name__}.stalled",
                                            arguments={"x-dead-letter-exchange": RPC.DLX_NAME})
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(rpc.call(f"{pattern.__name__}.stalled", kwargs={}, expiration=0.2), 10)
                with pytest.raises(aio_pika.exceptions.MessageProcessError):
                    await asyncio.wait_for(rpc.call(f"{pattern.__name__}.nowhere", kwargs={}), 10)
                await rpc.close()
                await channel.close()

    run(asyncio.wait_for(main(), 60))


def test_messages_that_expire_while_the_broker_is_down_are_dead_lettered_after_the_restart(small_config):
    """A TTL counts from when the message was stored: after a restart, what expired meanwhile
    reaches the dead-letter exchange, what did not waits its turn."""
    config = amqp_config(small_config)
    live = start_live_broker(config)
    try:
        with _connect(live.endpoint("amqp")[1]) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.exchange_declare("later", "fanout", durable=True)
            ch.queue_declare("later.all", durable=True)
            ch.queue_bind("later.all", "later")
            ch.queue_declare("waiting", durable=True, arguments={"x-message-ttl": 600_000,
                                                                 "x-dead-letter-exchange": "later"})
            ch.basic_publish("", "waiting", b"short", pika.BasicProperties(delivery_mode=2, expiration="300"))
            ch.basic_publish("", "waiting", b"long", pika.BasicProperties(delivery_mode=2))
        stopped = time.monotonic()
    finally:
        live.stop()
    while time.monotonic() - stopped < 0.5:  # down for longer than "short"'s expiration
        time.sleep(0.05)
    live = start_live_broker(config)
    try:
        with _connect(live.endpoint("amqp")[1]) as conn:
            ch = conn.channel()
            method, props, body = _get(ch, "later.all")
            assert body == b"short" and props.headers["x-death"][0]["original-expiration"] == "300"
            assert _count(ch, "waiting") == 1
    finally:
        live.stop()


def test_quorum_queue_deliveries_count_their_returns_in_x_delivery_count(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("poison.dead")
        ch.queue_declare("poison", durable=True, arguments={
            "x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "poison.dead"})
        ch.basic_publish("", "poison", b"bad", pika.BasicProperties(headers={"kept": "yes"}))
        counts = []
        for method, props, body in ch.consume("poison", inactivity_timeout=TIMEOUT):
            assert body == b"bad" and props.headers["kept"] == "yes"
            counts.append(props.headers["x-delivery-count"])
            ch.basic_nack(method.delivery_tag, requeue=True)
            if len(counts) == 3:
                break
        ch.cancel()
        assert counts == [0, 1, 2]
        _, props, body = _get(ch, "poison.dead")
        assert body == b"bad" and props.headers["x-death"][0]["reason"] == "delivery_limit"
