"""Where a consumer group's positions live: on the broker (clustering) or in a file
(broadcasting, where every consumer reads everything and keeps its own place).

Both stores keep the latest offset of each queue in memory (`update`, on every consumed
batch) and write them out in `persist`, which the consumers call every 5 s and on
shutdown, and for a queue that moves to another consumer before it is dropped. An offset
is the next message to consume, as RocketMQ stores it.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import MessageQueue

from .errors import ClientError
from .runtime import ClientRuntime, log


class RemoteOffsetStore:
    """Offsets committed to the broker that holds each queue (UPDATE_CONSUMER_OFFSET)."""

    def __init__(self, runtime: ClientRuntime, group: str) -> None:
        self._runtime = runtime
        self._group = group
        self.offsets: dict[MessageQueue, int] = {}
        self._persisted: dict[MessageQueue, int] = {}

    async def read(self, mq: MessageQueue) -> int:
        """The group's committed offset for `mq` on the broker; -1 when it has none."""
        response = await self._runtime.invoke(
            self._runtime.routes.read_addr(mq.broker_name),
            RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields={
                "consumerGroup": self._group, "topic": mq.topic, "queueId": str(mq.queue_id)}))
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(response.remark or "offset query refused", response.code)
        offset = int(response.ext_fields.get("offset", -1))
        self._persisted[mq] = offset
        return offset

    def update(self, mq: MessageQueue, offset: int) -> None:
        self.offsets[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.offsets.pop(mq, None)
        self._persisted.pop(mq, None)

    async def persist(self, mqs: list[MessageQueue] | None = None) -> None:
        """Commit the offsets of `mqs` (all held queues by default) that moved."""
        wanted = [(mq, off) for mq, off in self.offsets.items()
                  if (mqs is None or mq in mqs) and self._persisted.get(mq) != off]
        results = await asyncio.gather(*(self._commit(mq, off) for mq, off in wanted),
                                       return_exceptions=True)
        for (mq, off), result in zip(wanted, results):
            if isinstance(result, ClientError):
                log.warning("committing offset %d of %s failed: %s", off, mq, result)
            elif isinstance(result, BaseException):
                raise result
            else:
                self._persisted[mq] = off

    async def _commit(self, mq: MessageQueue, offset: int) -> None:
        await self._runtime.invoke_ok(
            self._runtime.routes.read_addr(mq.broker_name),
            RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields={
                "consumerGroup": self._group, "topic": mq.topic, "queueId": str(mq.queue_id),
                "commitOffset": str(offset)}), "offset commit")


class LocalOffsetStore:
    """Offsets in a JSON file, written atomically (temp file + rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[MessageQueue, int] = {}
        self._saved: dict[str, int] = {}
        try:
            self._saved = json.loads(path.read_text())["offsetTable"]
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClientError(f"cannot read the offset file {path}: {exc}") from None

    @staticmethod
    def _key(mq: MessageQueue) -> str:
        return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"

    async def read(self, mq: MessageQueue) -> int:
        return self._saved.get(self._key(mq), -1)

    def update(self, mq: MessageQueue, offset: int) -> None:
        self.offsets[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.offsets.pop(mq, None)

    async def persist(self, mqs: list[MessageQueue] | None = None) -> None:
        for mq, offset in self.offsets.items():
            self._saved[self._key(mq)] = offset
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"offsetTable": self._saved}, indent=1))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("writing the offset file %s failed: %s", self.path, exc)


OffsetStore = RemoteOffsetStore | LocalOffsetStore
