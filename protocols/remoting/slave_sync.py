"""RocketMQ 4.x's SlaveSynchronize: a slave copies its master's metadata every 10 s.

Topics (GET_ALL_TOPIC_CONFIG 21, Kafka topic configs included as RocketMQ 5's attributes),
consumer offsets (GET_ALL_CONSUMER_OFFSET 43), delay offsets (GET_ALL_DELAY_OFFSET 45) and
subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201), and the master's CommitLog end
(GET_BROKER_RUNTIME_INFO 28: how far behind a catching-up slave logs it is), asked of the
master's remoting address that the name server's register answer named (masterAddr), and
applied through
`core.facade.replica`. What it cannot copy in time is lost on a failover (up to one
interval of offsets): docs/operations.md. A failed round is logged and tried again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from rocketport.core.broker import Broker
from rocketport.core.facade import replica

from .client import RemotingClient, RemotingClientError
from .codes import RequestCode, ResponseCode
from .command import RemotingCommand
from .lenient_json import LenientJSONError, loads_lenient

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0  # RocketMQ's slaveSynchronize period


class SlaveSynchronize:
    def __init__(self, broker: Broker, interval_s: float = SYNC_INTERVAL_S) -> None:
        self.broker = broker
        # called when the topic table changed: the slave registers it with its name servers
        # at once, so routes list its queues before its master may be gone
        self.topics_changed: Callable[[], None] | None = None
        self.interval_s = interval_s
        self.master_addr = ""
        self.last_sync_ms = 0
        self._learnt = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def set_master_addr(self, addr: str) -> None:
        if addr and addr != self.master_addr:
            log.info("slave: master's remoting address is %s", addr)
            self.master_addr = addr
            self._learnt.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="slave-synchronize")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            if not self.master_addr:
                await self._learnt.wait()
            self._learnt.clear()
            try:
                await self.sync_once()
            except (OSError, asyncio.TimeoutError, RemotingClientError, LenientJSONError,
                    ValueError, TypeError, KeyError) as exc:
                log.warning("slave: copying metadata from master %s failed: %s", self.master_addr, exc)
            try:
                await asyncio.wait_for(self._learnt.wait(), self.interval_s)
            except asyncio.TimeoutError:
                pass

    async def sync_once(self) -> None:
        """One round: the four tables, each replacing the slave's."""
        if not self.broker.config.is_slave:
            return
        async with await RemotingClient.connect(self.master_addr) as client:
            topics = await _ask(client, RequestCode.GET_ALL_TOPIC_CONFIG)
            offsets = await _ask(client, RequestCode.GET_ALL_CONSUMER_OFFSET)
            delays = await _ask(client, RequestCode.GET_ALL_DELAY_OFFSET)
            groups = await _ask(client, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            try:  # only for the catch-up's log lines: a refusal does not stop the copy
                runtime = await _ask(client, RequestCode.GET_BROKER_RUNTIME_INFO)
            except ValueError as exc:
                log.debug("slave: the master's runtime info: %s", exc)
                runtime = {}
        broker = self.broker
        replica.apply_master_log_end(broker, (runtime.get("table") or {}).get("commitLogMaxOffset"))
        if replica.apply_topics(broker, topics.get("topicConfigTable") or {}) and self.topics_changed:
            self.topics_changed()
        replica.apply_offsets(broker, offsets.get("offsetTable") or {})
        replica.apply_delay_offsets(broker, delays.get("offsetTable") or {})
        replica.apply_groups(broker, groups.get("subscriptionGroupTable") or {})
        self.last_sync_ms = int(asyncio.get_running_loop().time() * 1000)


async def _ask(client: RemotingClient, code: RequestCode) -> dict[str, Any]:
    resp = await client.invoke(RemotingCommand(code=int(code)), 5.0)
    if resp.code != ResponseCode.SUCCESS:
        raise ValueError(f"request {int(code)} answered {resp.code}: {resp.remark}")
    body = loads_lenient(bytes(resp.body)) if resp.body else {}
    if not isinstance(body, dict):
        raise ValueError(f"request {int(code)}: the body is not an object")
    return body
