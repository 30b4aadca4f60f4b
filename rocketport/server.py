"""Server assembly: the Broker facade plus the wire front-ends configured for it.

Start order: the store opens (and recovers) before any listener accepts; stop order is the
reverse, so listeners stop before the store flushes and writes its clean checkpoint.
"""

from __future__ import annotations

import gc
import logging
import os

from rocketport.allocator import tune_malloc
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.protocols.kafka.server import KafkaServer
from rocketport.protocols.remoting.frontend import RemotingFrontEnd

log = logging.getLogger("rocketport.server")


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker = Broker(config)
        self.remoting = RemotingFrontEnd(self.broker)
        self.kafka: KafkaServer | None = None

    async def start(self) -> None:
        await self.broker.start()
        report = self.broker.store.recovery_report
        log.info("store %s opened (%s recovery, log end %d, %d topics)",
                 os.path.abspath(self.config.store_path_root_dir),
                 "crash" if self.broker.store.recovered_from_crash else "clean",
                 report.get("end", 0), len(self.broker.topics.table))
        await self.remoting.start()
        if self.config.kafka.enabled:
            self.kafka = KafkaServer(self.broker)
            await self.kafka.start()
        gc.freeze()  # start-up objects leave the collector's scans: shorter GC pauses under load
        tune_malloc()  # large request and response buffers reuse heap pages (see allocator.py)
        log.info("broker %s ready (pid %d)", self.config.broker_name, os.getpid())

    async def stop(self) -> None:
        if self.kafka is not None:
            await self.kafka.stop()
            self.kafka = None
        await self.remoting.stop()
        await self.broker.stop()
        log.info("store closed cleanly")
