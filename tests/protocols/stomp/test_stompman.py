"""stompman (asyncio, STOMP 1.2, heart-beats on by default): queues, topics, a handler
failure NACKed to the retry path and redelivered, transactions, binary bodies, receipts."""

from __future__ import annotations

import asyncio

import stompman

from .stomp_support import endpoint, stored


def client(live) -> stompman.Client:
    host, port = endpoint(live)
    return stompman.Client([stompman.ConnectionParameters(host, port, "", "")],
                           heartbeat=stompman.Heartbeat(200, 200), connect_timeout=5)


async def until(predicate, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def test_queue_with_a_failing_handler_is_nacked_and_redelivered(stomp_broker):
    seen: list[tuple[bytes, dict]] = []
    failures: list[Exception] = []

    async def main() -> None:
        async with client(stomp_broker) as c:
            async def handle(frame: stompman.MessageFrame) -> None:
                seen.append((frame.body, dict(frame.headers)))
                if len(seen) == 1:
                    raise RuntimeError("first attempt fails")

            sub = await c.subscribe("/queue/sm", handle, ack="client-individual",
                              on_suppressed_exception=lambda exc, frame: failures.append(exc),
                              headers={"x-group": "SmGroup"})
            await c.send(b"\0bin\0", "/queue/sm", headers={"color": "red"}, receipt_timeout=10)
            await until(lambda: len(seen) >= 2)
            await asyncio.sleep(0.3)
            await sub.unsubscribe()  # stompman's close waits for every subscription to end

    asyncio.run(main())
    assert [body for body, _ in seen] == [b"\0bin\0", b"\0bin\0"]
    assert seen[1][1]["redelivered"] == "true" and seen[0][1]["redelivered"] == "false"
    assert seen[0][1]["color"] == "red" and len(failures) == 1


def test_topic_and_transactions(stomp_broker):
    got: list[bytes] = []

    async def main() -> None:
        async with client(stomp_broker) as c:
            async def handle(frame: stompman.MessageFrame) -> None:
                got.append(frame.body)

            sub = await c.subscribe("/topic/smt", handle, ack="auto", receipt_timeout=10,
                              on_suppressed_exception=lambda exc, frame: None)
            async with c.begin() as tx:
                await tx.send(b"one", "/topic/smt")
                await tx.send(b"two", "/topic/smt")
                # the barrier: a SEND with a receipt is answered after the frames before it
                await c.send(b"elsewhere", "/topic/smt-other", receipt_timeout=10)
                assert stored(stomp_broker, "smt") == [] and got == [], "nothing before COMMIT"
            await until(lambda: len(got) >= 2)
            try:
                async with c.begin() as tx:
                    await tx.send(b"aborted", "/topic/smt")
                    raise LookupError
            except LookupError:
                pass
            await c.send(b"three", "/topic/smt", receipt_timeout=10)
            await until(lambda: len(got) >= 3)
            await sub.unsubscribe()

    asyncio.run(main())
    assert got == [b"one", b"two", b"three"]
    assert sorted(m.body for m in stored(stomp_broker, "smt")) == [b"one", b"three", b"two"]
