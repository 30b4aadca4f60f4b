"""PullConsumer (assign, seek, poll, commit) and TransactionProducer against a live broker."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from rocketport.client import (
    AdminClient,
    ClientError,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    SendStatus,
    TransactionProducer,
)
from tests.support.aio import run
from tests.support.live_broker import start_live_broker


async def poll_until(consumer: PullConsumer, count: int, timeout_s: float = 10.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += await consumer.poll(timeout_s=0.2, max_messages=count - len(got))
    return got


def test_assign_seek_poll_commit(broker):
    async def main():
        async with Producer(broker.namesrv, "PG") as producer:
            for i in range(20):
                await producer.send(Message("Pulled", b"%d" % i, tags="even" if i % 2 == 0 else "odd"))
        async with PullConsumer("PullGroup", broker.namesrv, consume_from="first") as consumer:
            queues = await consumer.queues("Pulled")
            consumer.assign(queues)
            got = await poll_until(consumer, 20)
            assert sorted(int(m.body) for m in got) == list(range(20))
            assert await consumer.poll(timeout_s=0.2) == []
            q = got[0].queue
            consumer.seek(q, 0)  # read one queue again from the start
            again = await poll_until(consumer, sum(m.queue == q for m in got))
            assert [m.body for m in again] == [m.body for m in got if m.queue == q]
            await consumer.commit()
        async with AdminClient(broker.namesrv) as admin:
            committed = [await admin.committed_offset("PullGroup", mq) for mq in queues]
            assert sum(max(0, c) for c in committed) == 20
        # the group resumes after its commits; a tag filter applies to what is new
        async with Producer(broker.namesrv, "PG") as producer:
            for i in range(20, 26):
                await producer.send(Message("Pulled", b"%d" % i, tags="even" if i % 2 == 0 else "odd"))
        async with PullConsumer("PullGroup", broker.namesrv) as consumer:
            consumer.assign(await consumer.queues("Pulled"), "even")
            got = await poll_until(consumer, 3)
            assert sorted(int(m.body) for m in got) == [20, 22, 24]
            with pytest.raises(ClientError):
                consumer.seek(dataclasses.replace(queues[0], topic="Other"), 0)
    run(main())


def test_transactions_commit_rollback_and_unknown_checked_back(client_config):
    config = dataclasses.replace(client_config, transaction_time_out=200,
                                 transaction_check_interval=100)
    broker = start_live_broker(config)
    try:
        async def main():
            checked: list = []

            async def execute(msg, arg):
                if arg == "explode":
                    raise RuntimeError("local transaction failed")
                return {"commit": LocalTransactionState.COMMIT,
                        "rollback": LocalTransactionState.ROLLBACK}.get(arg, LocalTransactionState.UNKNOWN)

            async def check(msg):
                checked.append((msg.body, msg.topic, msg.properties.get("order")))
                return LocalTransactionState.COMMIT if msg.body == b"unknown" else LocalTransactionState.ROLLBACK

            async with TransactionProducer(broker.namesrv, "TxGroup", execute=execute,
                                           check=check) as producer:
                results = [await producer.send_in_transaction(
                    Message("TxTopic", body, properties={"order": "42"}), arg=arg)
                    for body, arg in [(b"committed", "commit"), (b"rolled back", "rollback"),
                                      (b"unknown", None), (b"exploded", "explode")]]
                assert all(r.status is SendStatus.SEND_OK for r in results)
                async with PullConsumer("TxReader", broker.namesrv, consume_from="first") as reader:
                    reader.assign(await reader.queues("TxTopic"))
                    got = await poll_until(reader, 2, timeout_s=20)
                    await asyncio.sleep(0.5)
                    got += await reader.poll(timeout_s=0.3)
            assert sorted(m.body for m in got) == [b"committed", b"unknown"]
            assert {m.properties["order"] for m in got} == {"42"}
            assert (b"unknown", "TxTopic", "42") in checked and (b"exploded", "TxTopic", "42") in checked
            assert all(body not in (b"committed", b"rolled back") for body, _, _ in checked)
        run(main())
    finally:
        broker.stop()
