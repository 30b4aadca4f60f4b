"""Blocking access to a Rocketport (or RocketMQ 4.x) cluster from inside a Spark worker.

Every data-source method runs in a Python worker process the JVM starts, and readers are
pickled between them, so nothing here is kept on a reader: a `Link` is opened where it is
used (one per planning call, one per partition read) and owns a private event loop that
drives the native client's runtime (routes through the name server, pooled connections).
The requests the client's public classes do not offer as the pipeline needs them — a
pull of one range with the filter sent along and nothing committed, a queue's offset by
timestamp, an offset commit for a group that has no consumer online — are built here from
the client's runtime and `rocketport.protocols.remoting`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from rocketport.client.message import MessageQueue
from rocketport.client.pulling import Puller, PullStatus, Subscription, outcome
from rocketport.client.runtime import ClientRuntime
from rocketport.protocols.remoting import RemotingCommand, RequestCode

T = TypeVar("T")
MAX_PULL = 1024  # the broker's cap on messages per pull (MAX_PULL_MSG_NUMS)


def subscription(topic: str, tags: str | None, sql: str | None) -> Subscription:
    if sql:
        return Subscription(topic, sql, "SQL92")
    return Subscription(topic, tags or "*", "TAG")


class Link:
    """``with Link(namesrv) as link: link.max_offset(mq)``: one event loop, one runtime."""

    def __init__(self, namesrv: str, group: str = "rocketport-spark", timeout_s: float = 10.0) -> None:
        self.loop = asyncio.new_event_loop()
        self.runtime = ClientRuntime(namesrv, timeout_s=timeout_s)
        self.puller = Puller(group)
        self.group = group

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.runtime.close())
        finally:
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    # ---------------------------------------------------------------- routes and offsets
    def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic` (route looked up through the name server)."""
        return self.run(self.runtime.routes.subscribe_queues(topic, refresh=True))

    def broker_addr(self, mq: MessageQueue) -> str:
        return self.runtime.routes.broker_addr(mq.broker_name)

    async def _offset(self, code: RequestCode, mq: MessageQueue, **extra: str) -> int:
        response = await self.runtime.invoke_ok(
            self.broker_addr(mq), RemotingCommand(code, ext_fields={
                "topic": mq.topic, "queueId": str(mq.queue_id), **extra}), f"offset of {mq}")
        return int(response.ext_fields.get("offset", 0))

    def min_offsets(self, mqs: list[MessageQueue]) -> list[int]:
        return self.run(self._gather(RequestCode.GET_MIN_OFFSET, mqs))

    def max_offsets(self, mqs: list[MessageQueue]) -> list[int]:
        """The offset each queue's next message will get."""
        return self.run(self._gather(RequestCode.GET_MAX_OFFSET, mqs))

    def offsets_by_time(self, mqs: list[MessageQueue], timestamp_ms: int) -> list[int]:
        """Per queue, the offset of the first message stored at or after `timestamp_ms`."""
        return self.run(self._gather(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mqs,
                                     timestamp=str(timestamp_ms)))

    async def _gather(self, code: RequestCode, mqs: list[MessageQueue], **extra: str) -> list[int]:
        return list(await asyncio.gather(*(self._offset(code, mq, **extra) for mq in mqs)))

    def commit_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """Write `offsets` as `group`'s committed offsets (progress others can read)."""
        async def commit(mq: MessageQueue, offset: int) -> None:
            await self.runtime.invoke_ok(self.broker_addr(mq), RemotingCommand(
                RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields={
                    "consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id),
                    "commitOffset": str(offset)}), "offset commit")

        async def all_of() -> None:
            await asyncio.gather(*(commit(mq, off) for mq, off in offsets.items()))
        self.run(all_of())

    # ---------------------------------------------------------------- reads
    def first_pulls(self, pulls: list[tuple[str, MessageQueue, int, Subscription]],
                    count: int) -> list[tuple[int, bytes]]:
        """(next offset, the records' bytes undecoded) of one pull of up to `count`
        matching messages from each (broker address, queue, offset, filter), all sent at
        once and filtered by the broker; never held, never commits."""
        async def pull(addr: str, mq: MessageQueue, offset: int, sub: Subscription) -> tuple[int, bytes]:
            conn = await self.runtime.pool.get(addr)
            response = await conn.response(
                self.puller.send(conn, mq, offset, max(1, min(count, MAX_PULL)), sub, suspend=False,
                                 send_subscription=True),
                self.runtime.timeout_s)
            status, next_offset, _, _ = outcome(response)
            return next_offset, (response.body or b"") if status is PullStatus.FOUND else b""

        async def all_of() -> list[tuple[int, bytes]]:
            return list(await asyncio.gather(*(pull(*one) for one in pulls)))
        return self.run(all_of()) if pulls else []

    def send_pulls(self, addr: str, mq: MessageQueue, requests: list[tuple[int, int]],
                   sub: Subscription) -> asyncio.Task[list[tuple[PullStatus, int, bytes]]]:
        """Put pulls of (offset, count) on the wire and return at once, so the broker
        serves them while the caller works; `answers` waits for them. Never held, never
        commit."""
        async def pulls() -> list[tuple[PullStatus, int, bytes]]:
            conn = await self.runtime.pool.get(addr)
            sent = [self.puller.send(conn, mq, offset, max(1, min(count, MAX_PULL)), sub,
                                     suspend=False, send_subscription=True)
                    for offset, count in requests]
            out = []
            for one in sent:
                response = await conn.response(one, self.runtime.timeout_s)
                status, next_offset, _, _ = outcome(response)
                out.append((status, next_offset, (response.body or b"") if status is PullStatus.FOUND else b""))
            return out

        async def turns() -> None:  # the task sends, then the connection writes
            for _ in range(3):
                await asyncio.sleep(0)
        task = self.loop.create_task(pulls())
        self.run(turns())
        return task

    def answers(self, task: asyncio.Task[list[tuple[PullStatus, int, bytes]]]) -> list[tuple[PullStatus, int, bytes]]:
        """The (status, next offset, the records' bytes undecoded) of `send_pulls`' pulls."""
        return self.run(task)
