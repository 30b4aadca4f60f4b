"""The broker's replication side, by role: a master's HA port and SYNC_MASTER wait, or a
slave's client. Started after the store, stopped before it; `set_role` switches it while
the broker runs (the failover's hook: a slave promoted stops its client and opens the port;
a master demoted fails its waiting puts, truncates as told and starts a client).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ..config import BrokerConfig
from ..errors import SlaveNotAvailable
from ..store.message_store import MessageStore
from ..periodic import run_every
from .master import HAMaster, SlaveState
from .offset_log import OffsetLog
from .slave import HASlave
from .transfer import GroupTransfer

log = logging.getLogger(__name__)

OFFSET_LOG_INTERVAL_S = 0.1  # how stale a slave's consumer offsets may be (ASYNC_MASTER)


class HAService:
    def __init__(self, config: BrokerConfig, store: MessageStore, offset_log: OffsetLog | None = None) -> None:
        self.config = config
        self.store = store
        self.offset_log = offset_log  # a master writes its offsets into the log (offset_log.py)
        self.transfer = GroupTransfer(config.sync_flush_timeout, self._in_sync)
        self.master: HAMaster | None = None
        self.slave: HASlave | None = self._new_slave() if config.is_slave else None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # the other members of this broker group, by their own brokerId (never the 0 an elected
        # master registers under: Kafka's node ids stay put): their Kafka (host, port), as a
        # front-end learnt them (protocols/remoting: the name server's route and each
        # member's configuration); Kafka's Metadata lists them as replicas
        self.peers: dict[int, tuple[str, int]] = {}
        self.on_slave_connected: Callable[[], None] | None = None  # e.g. learn the peers again
        self.counts: Callable[[SlaveState], bool] = lambda _state: True  # see HAMaster.counts
        self.on_master_link_lost: Callable[[], None] = lambda: None  # see HASlave.on_link_lost

    def _new_slave(self) -> HASlave:
        slave = HASlave(self.config, self.store)
        slave.on_link_lost = lambda: self.on_master_link_lost()
        return slave

    @property
    def role(self) -> str:
        return self.config.broker_role

    @property
    def port(self) -> int:
        """The bound HA port (0 when this broker offers none)."""
        return self.master.port if self.master is not None else 0

    def _in_sync(self, end: int) -> bool:
        return self.master is not None and self.master.in_sync(end)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self._stop.clear()
        if self.config.is_slave:
            assert self.slave is not None
            self._tasks.append(asyncio.create_task(self.slave.run(self._stop), name="ha-slave"))
        elif self.config.ha_listens:
            self.master = HAMaster(self.config, self.store, self.transfer,
                                   on_connect=lambda: self.on_slave_connected and self.on_slave_connected())
            self.master.counts = self.counts
            await self.master.start()
            self._tasks.append(asyncio.create_task(self.transfer.run(self._stop), name="ha-transfer"))
            if self.offset_log is not None:
                self._tasks.append(asyncio.create_task(run_every(
                    OFFSET_LOG_INTERVAL_S, self._offsets_to_log, self._stop,
                    name="writing consumer offsets into the log"), name="ha-offset-log"))

    async def _offsets_to_log(self) -> None:
        """The periodic offset record, while a slave is there to read it (a slave that comes
        later has SlaveSynchronize's copy, then every change since the last record)."""
        if self.master is not None and self.master.slaves and self.offset_log is not None:
            await self.offset_log.flush()

    async def stop(self) -> None:
        self._stop.set()
        if self.master is not None:
            await self.master.stop()
            self.master = None
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.transfer.fail_all()

    async def set_role(self, role: str, *, truncate_to: int | None = None) -> None:
        """Switch to ``role`` (ASYNC_MASTER, SYNC_MASTER or SLAVE) while the broker runs."""
        await self.stop()
        if truncate_to is not None and truncate_to < self.store.commitlog.max_offset:
            self.store.truncate_replica(truncate_to)
        self.config.broker_role = role
        self.store.set_slave(role == "SLAVE")
        self.slave = self._new_slave() if role == "SLAVE" else None
        await self.start()

    # -- SYNC_MASTER ------------------------------------------------------------------------
    def wait(self, end: int, result: object = None) -> asyncio.Future[None]:
        """SYNC_MASTER: a future resolved once a slave acknowledged ``end`` (see transfer)."""
        if self.master is None:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            fut.set_exception(SlaveNotAvailable("this master has no HA port open", result))
            return fut
        return self.transfer.wait(end, result)

    # -- the group, as Kafka's Metadata shows it -----------------------------------------------
    def set_peers(self, peers: dict[int, tuple[str, int]]) -> None:
        self.peers = {broker_id: addr for broker_id, addr in peers.items() if broker_id != self.config.broker_id}

    def in_sync_ids(self) -> list[int]:
        """The group's members in sync (Kafka's ISR), by brokerId: the master, and the
        slaves a master sees within haSlaveFallbehindMax (named when every known slave is, or
        when it knows one slave: the HA wire does not say which slave a connection is); a
        slave names itself while connected and close behind."""
        config = self.config
        if self.master is not None or not config.is_slave:
            slaves = sorted(i for i in self.peers if i != 0)
            in_sync = sum(1 for s in self.master.runtime_info() if s["inSync"]) if self.master else 0
            return [config.broker_id] + (slaves if slaves and in_sync >= len(slaves) else [])
        assert self.slave is not None
        info = self.slave.runtime_info()
        close = info["connected"] and 0 <= int(info["lagBytes"]) < config.ha_slave_fallbehind_max  # type: ignore[call-overload]
        return [0] + ([config.broker_id] if close else [])

    # -- the name server's answer -------------------------------------------------------------
    def master_learnt(self, ha_address: str) -> None:
        """A slave's register answer named its master's HA address."""
        if self.slave is not None:
            self.slave.set_master_address(ha_address)

    def runtime_info(self) -> dict[str, object]:
        """HA state for brokerStatus and clusterList."""
        info: dict[str, object] = {"brokerRole": self.role}
        if self.master is not None:
            slaves = self.master.runtime_info()
            info.update(haPort=self.master.port, slaves=slaves,
                        inSyncSlaves=sum(1 for s in slaves if s["inSync"]),
                        slaveAckOffset=self.transfer.acked, flushSlaveTimeouts=self.transfer.timeouts,
                        slaveNotAvailable=self.transfer.unavailable)
        if self.slave is not None:
            info.update(self.slave.runtime_info())
        return info
