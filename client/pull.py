"""The pull consumer: the caller assigns queues, seeks, polls and commits.

No rebalance and no listener: `assign` says which queues to read (from `queues(topic)`, or
any subset), `poll` returns the next messages of any of them (pulling every assigned queue
at once, buffering what it does not return), and `commit` writes the positions of what
`poll` returned to the broker, as the group's offsets. A queue starts at the group's
committed offset, else where `consume_from` says; `seek` moves it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from rocketport.protocols.remoting import RemotingCommand, RequestCode
from rocketport.protocols.remoting.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)

from .errors import ClientError
from .message import MessageExt
from .offsets import RemoteOffsetStore
from .pulling import PullStatus, Puller, Subscription
from .routing import queue_order
from .runtime import ClientRuntime
from .transport import Tls


class PullConsumer:
    """``async with PullConsumer(group, namesrv) as c: c.assign(await c.queues(t)); await c.poll()``"""

    def __init__(self, group: str, namesrv: str | None = None, *, consume_from: str = "last",
                 pull_batch_size: int = 32, instance_name: str | None = None,
                 credentials: tuple[str, str] | None = None, tls: Tls = None) -> None:
        if consume_from not in ("last", "first"):
            raise ValueError("consume_from must be 'last' or 'first'")
        self.group = group
        self.consume_from = consume_from
        self.pull_batch_size = pull_batch_size
        self.runtime = ClientRuntime(namesrv, instance_name=instance_name, credentials=credentials, tls=tls)
        self.runtime.heartbeat_data = self._heartbeat_data
        self._offsets = RemoteOffsetStore(self.runtime, group)
        self._puller = Puller(group)
        self._subs: dict[str, Subscription] = {}
        self._positions: dict[MessageQueue, int] = {}  # next offset to pull
        self._buffer: deque[MessageExt] = deque()
        self._started = False

    def _heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(self.runtime.client_id, consumer_data_set=[ConsumerData(
            self.group, ConsumeType.CONSUME_ACTIVELY, MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            [SubscriptionData(s.topic, s.expression, expression_type=s.expression_type)
             for s in self._subs.values()])])

    async def start(self) -> None:
        if not self._started:
            await self.runtime.start()
            self._started = True

    async def shutdown(self) -> None:
        """Commit what was polled, unregister, close."""
        if not self._started:
            return
        self._started = False
        await self.commit()
        await self.runtime.unregister(consumer_group=self.group)
        await self.runtime.close()

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic`, in the order every client sorts them."""
        return await self.runtime.routes.subscribe_queues(topic, refresh=True)

    def assign(self, queues: list[MessageQueue], expression: str = "*", *,
               sql: str | None = None) -> None:
        """Read these queues (replacing any earlier assignment), filtered by tag
        `expression` or by `sql`. Positions of queues kept from before are kept."""
        for mq in queues:
            self._subs[mq.topic] = (Subscription(mq.topic, sql, "SQL92") if sql is not None
                                    else Subscription(mq.topic, expression or "*", "TAG"))
        wanted = set(queues)
        self._positions = {mq: off for mq, off in self._positions.items() if mq in wanted}
        for mq in queues:
            self._positions.setdefault(mq, -1)
        self._buffer = deque(m for m in self._buffer if m.queue in wanted)

    @property
    def assignment(self) -> list[MessageQueue]:
        return sorted(self._positions, key=queue_order)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read `mq` from `offset` on (buffered messages of it are forgotten)."""
        if mq not in self._positions:
            raise ClientError(f"{mq} is not assigned")
        self._positions[mq] = offset
        self._buffer = deque(m for m in self._buffer if m.queue != mq)

    def position(self, mq: MessageQueue) -> int:
        """The offset of the next message `poll` returns from `mq` (-1: not known yet)."""
        for msg in self._buffer:
            if msg.queue == mq:
                return msg.queue_offset
        return self._positions.get(mq, -1)

    async def _start_offset(self, mq: MessageQueue) -> int:
        offset = await self._offsets.read(mq)
        if offset >= 0:
            return offset
        if self.consume_from == "first":
            return 0
        response = await self.runtime.invoke_ok(
            self.runtime.routes.read_addr(mq.broker_name),
            RemotingCommand(RequestCode.GET_MAX_OFFSET, ext_fields={
                "topic": mq.topic, "queueId": str(mq.queue_id)}), "max offset")
        return int(response.ext_fields.get("offset", 0))

    async def poll(self, timeout_s: float = 1.0, max_messages: int = 32) -> list[MessageExt]:
        """Up to `max_messages` next messages of the assigned queues; [] after `timeout_s`."""
        if not self._started:
            raise ClientError("consumer is not started")
        deadline = time.monotonic() + timeout_s
        while not self._buffer:
            await self._fill()
            if self._buffer or time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        out = [self._buffer.popleft() for _ in range(min(max_messages, len(self._buffer)))]
        for msg in out:
            self._offsets.update(msg.queue, msg.queue_offset + 1)
        return out

    async def _fill(self) -> None:
        queues = list(self._positions)
        for mq in queues:
            if self._positions[mq] < 0:
                self._positions[mq] = await self._start_offset(mq)
        results = await asyncio.gather(*(self._pull(mq) for mq in queues))
        for mq, messages in zip(queues, results):
            self._buffer.extend(messages)

    async def _pull(self, mq: MessageQueue) -> list[MessageExt]:
        conn = await self.runtime.pool.get(self.runtime.routes.read_addr(mq.broker_name))
        result = await self._puller.pull(conn, mq, self._positions[mq], self.pull_batch_size,
                                         self._subs[mq.topic], suspend=False,
                                         send_subscription=True, timeout_s=self.runtime.timeout_s)
        if mq in self._positions:  # not reassigned meanwhile
            self._positions[mq] = result.next_begin_offset
        if result.status is not PullStatus.FOUND:
            return []
        return result.messages

    async def commit(self) -> None:
        """Commit, as the group's offsets, the positions after the messages polled."""
        await self._offsets.persist()
