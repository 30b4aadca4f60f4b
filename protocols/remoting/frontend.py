"""The remoting front-end of one broker process: its listeners and their start/stop order.

Assembles the broker listener (config.listen_port) and either the embedded name server
(config.namesrv, the single-process default: the broker answers route requests itself)
or, when ``namesrvAddr`` names external name servers, a registrar that registers with
them. Start after the Broker facade has started; stop before it stops. Nothing here
handles requests.
"""

from __future__ import annotations

import os

from rocketport.core.broker import Broker

from ..frontend import ListenerFrontEnd
from ..tls import TlsContexts
from .acl_hook import AclCheckedHandlers
from .handlers import BrokerHandlers
from .kv_config import KVConfig, NamesrvSettings
from .namesrv import BrokerRegistrar, LocalRoutes, NameServerHandlers
from .session import RemotingListener
from .slave_sync import SlaveSynchronize


class RemotingFrontEnd(ListenerFrontEnd):
    name = "remoting"

    def __init__(self, broker: Broker) -> None:
        super().__init__()
        config = broker.config
        limits = config.connection_limits
        self.broker = broker
        self.handlers = BrokerHandlers(broker)
        self.handlers.traffic = self.traffic
        if self.handlers.lane is not None:
            self.handlers.lane.traffic = self.traffic
        served = AclCheckedHandlers(self.handlers, broker.acl) \
            if config.acl_enable else self.handlers
        tls = TlsContexts(config).same_port()  # tls.server.mode on the remoting port
        self.listener = RemotingListener(served, config.bind_address, config.listen_port,
                                         role="broker (remoting)", limits=limits, tls=tls)
        self.namesrv_listener: RemotingListener | None = None
        self.namesrv_handlers: NameServerHandlers | None = None
        self.registrar: BrokerRegistrar | None = None
        addrs = [a.strip() for a in config.namesrv_addr.replace(",", ";").split(";") if a.strip()]
        # a slave copies its master's metadata (SlaveSynchronize), from the address its
        # name servers' register answer names
        self.slave_sync: SlaveSynchronize | None = SlaveSynchronize(broker) if config.is_slave else None
        if addrs:
            self.registrar = BrokerRegistrar(broker, self.broker_addr, addrs,
                                             on_master=self.slave_sync.set_master_addr if self.slave_sync else None)
            if self.slave_sync is not None:
                self.slave_sync.topics_changed = self.registrar.register_soon
        elif config.namesrv.enabled:
            kv_path = os.path.join(config.store_path_root_dir, "config", "kvConfig.json")
            kv = KVConfig(kv_path)
            kv.load()
            self.namesrv_handlers = NameServerHandlers(LocalRoutes(broker, self.broker_addr), kv,
                                                       NamesrvSettings(config.namesrv.port, kv_path))
            self.namesrv_listener = RemotingListener(self.namesrv_handlers, config.namesrv.host,
                                                     config.namesrv.port, role="name server",
                                                     limits=limits, tls=tls)
        self.listeners = [self.listener] + ([self.namesrv_listener] if self.namesrv_listener else [])

    def broker_addr(self) -> str:
        """host:port clients should dial (the bound port once listening)."""
        return f"{self.broker.config.broker_ip1}:{self.listener.port}"

    async def bind(self) -> None:
        await super().bind()
        self.handlers.broker_addr = self.broker_addr()
        self.broker.set_store_port(self.listener.port)

    async def start(self) -> None:
        await super().start()
        if self.slave_sync is not None:
            await self.slave_sync.start()
        if self.registrar is not None:
            await self.registrar.start()

    async def stop(self) -> None:
        if self.registrar is not None:
            await self.registrar.stop()
        if self.slave_sync is not None:
            await self.slave_sync.stop()
        await super().stop()
        self.broker.remove_transaction_checker(self.handlers.check_transaction)
