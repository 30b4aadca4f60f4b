"""Server assembly: the Broker facade plus the wire front-ends the registry enables.

Start order: every front-end binds its ports, then the store is locked and opened (and
recovered), then the front-ends accept. So a taken port fails start-up before the store
is touched, and no client is served before recovery ends. Stop order is the reverse,
after an elected master has handed its group over (writes refused, lease revoked):
front-ends stop (draining their connections) before the store flushes and writes its
clean checkpoint. A failed start closes whatever it had opened, in the same order.
"""

from __future__ import annotations

import gc
import logging
import os
import resource

from rocketport.allocator import tune_malloc
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.protocols.frontend import FrontEnd
from rocketport.protocols.registry import build_enabled

log = logging.getLogger("rocketport.server")


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker = Broker(config)
        self.front_ends: dict[str, FrontEnd] = {fe.name: fe for fe in build_enabled(self.broker)}

    async def start(self) -> None:
        _raise_fd_limit()
        try:
            for front_end in self.front_ends.values():
                await front_end.bind()
            self._publish_listeners()
            await self.broker.start()
            self._log_store()
            for front_end in self.front_ends.values():
                await front_end.start()
        except BaseException:
            await self.stop()
            raise
        gc.freeze()  # start-up objects leave the collector's scans: shorter GC pauses under load
        tune_malloc()  # large request and response buffers reuse heap pages (see allocator.py)
        log.info("broker %s ready (pid %d)", self.config.broker_name, os.getpid())

    async def stop(self) -> None:
        await self.broker.hand_over()
        for front_end in reversed(self.front_ends.values()):
            await front_end.stop()
        if self.broker.running:
            await self.broker.stop()
            log.info("store closed cleanly")

    def _publish_listeners(self) -> None:
        """Under an election, every client port goes into the leader key while this node is
        master: a slave takes the master for dead only when all of them refuse connects."""
        election = self.broker.election
        if election is None:
            return
        wildcard = ("", "0.0.0.0", "::")
        election.listeners = tuple(sorted({
            f"{self.config.broker_ip1 if host in wildcard else host}:{port}"
            for front_end in self.front_ends.values() for _role, host, port in front_end.endpoints() if port}))

    def _log_store(self) -> None:
        stats = self.broker.stats()
        log.info("store %s opened after a %s (log end %d, %d topics); CommitLog segments of %s",
                 os.path.abspath(self.config.store_path_root_dir),
                 "crash: recovered" if self.broker.recovered_from_crash else "clean shutdown",
                 stats.commit_log_max_offset, stats.topics,
                 _size_text(self.config.mapped_file_size_commit_log))


def _size_text(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


def _raise_fd_limit() -> None:
    """Every connection is a descriptor: lift the soft limit to the hard one, as servers do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            log.debug("cannot raise the descriptor limit from %d to %d", soft, hard)
