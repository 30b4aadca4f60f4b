"""The slave's HA client (RocketMQ's HAService.HAClient).

Connects to the master's HA port (haMasterAddress, else the address the name server's
register answer named), reports this log's end on connect, after every append and at least
every haSendHeartbeatInterval, and appends each frame at the offset it names
(`MessageStore.append_replicated`: byte-identical, dispatched as recovery dispatches). A
frame for another offset ends the connection, except the master's answer to a slave that
is ahead of it (an empty frame at the master's end, below ours): with
haSlaveTruncateDivergent the log is cut back to it, else every attempt is refused and
logged until an operator decides. Reconnects after a pause while the broker runs.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..config import BrokerConfig
from ..store.message_store import MessageStore
from ..store.replica import ReplicaMismatch
from .codec import FrameDecoder, HAProtocolError, encode_report

log = logging.getLogger(__name__)

RECONNECT_S = 1.0  # between attempts (RocketMQ's HAClient waits 5 s; tests want less)
DIVERGED_RETRY_S = 30.0  # a diverged slave asks again (and logs again) this often
PROGRESS_INTERVAL_S = 5.0  # a catch-up says where it is this often


class Diverged(Exception):
    """This log holds bytes the master never had."""


class HASlave:
    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store
        self.master_address = config.ha_master_address
        self.connected = False
        self.last_frame = 0.0  # wall time of the master's last frame
        self.master_offset = -1  # where the master's stream stood at its last frame
        # the master's log end and when it was learnt (monotonic): SlaveSynchronize asks for
        # it every 10 s (the HA wire does not carry it); -1: not known
        self.master_log_end, self.master_log_end_at = -1, 0.0
        self.diverged: str | None = None
        self._changed = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self.local_address = ""  # this end of the HA connection (how an elected master knows us)

    def set_master_address(self, address: str) -> None:
        """The master's HA address as the name server tells it (ignored when configured,
        and under controllerMode etcd, where the election says whom to follow)."""
        if self.config.ha_master_address or self.config.controller_mode:
            return
        self.follow(address)

    def follow(self, address: str) -> None:
        """Replicate from ``address`` from now on (the connection to another one ends)."""
        if not address or address == self.master_address:
            return
        log.info("HA: master's HA address is %s", address)
        self.master_address = address
        self._changed.set()
        if self._writer is not None:
            self._writer.close()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if not self.master_address:
                await _wait_any(stop, self._changed, None)
                self._changed.clear()
                continue
            try:
                await self._session(stop)
            except Diverged as exc:
                self.diverged = str(exc)
                log.error("HA: %s", exc)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, HAProtocolError,
                    ReplicaMismatch) as exc:
                if self.connected or not isinstance(exc, OSError):
                    log.warning("HA: connection to master %s ended: %s", self.master_address,
                                exc or type(exc).__name__)
            finally:
                self.connected = False
                self._writer = None
            await _wait_any(stop, self._changed, DIVERGED_RETRY_S if self.diverged else RECONNECT_S)
            self._changed.clear()

    async def _session(self, stop: asyncio.Event) -> None:
        host, _, port = self.master_address.rpartition(":")
        # the reader's buffer holds a few of the master's frames (its default 64 KiB would
        # pause the socket after every slice of one)
        limit = 4 * self.config.ha_transfer_batch_size
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port), limit=limit), 5)
        self._writer = writer
        local = writer.get_extra_info("sockname") or ("", 0)
        self.local_address = f"{local[0]}:{local[1]}"
        store = self.store
        try:
            self.connected = True
            log.info("HA: connected to master %s at offset %d", self.master_address,
                     store.commitlog.max_offset)
            writer.write(encode_report(store.commitlog.max_offset))
            await writer.drain()
            reported = time.monotonic()
            decoder = FrameDecoder()
            catch_up = _CatchUp(self)
            beat_s = self.config.ha_send_heartbeat_interval / 1000
            silent_s = self.config.ha_housekeeping_interval / 1000
            while not stop.is_set():
                try:
                    data = await asyncio.wait_for(reader.read(limit), min(beat_s, silent_s))
                except asyncio.TimeoutError:
                    data = None
                if data == b"":
                    raise OSError("the master closed the connection")
                now = time.monotonic()
                if data:
                    appended = False
                    for frame in decoder.feed(data):
                        self.last_frame = time.time()
                        end = store.commitlog.max_offset
                        if frame.offset != end:
                            self._mismatch(frame.offset, len(frame.data), end)
                        if frame.data:
                            store.append_replicated(frame.offset, frame.data)
                            appended = True
                        catch_up.at(frame.offset, len(frame.data), now)
                        self.master_offset = frame.offset + len(frame.data)
                    if appended or now - reported >= beat_s:
                        writer.write(encode_report(store.commitlog.max_offset))
                        reported = now
                        await writer.drain()
                elif self.last_frame and time.time() - self.last_frame > silent_s:
                    raise asyncio.TimeoutError(f"no frame from the master for {silent_s * 1000:.0f} ms")
                else:
                    writer.write(encode_report(store.commitlog.max_offset))
                    reported = now
                    await writer.drain()
        finally:
            writer.close()

    def _mismatch(self, offset: int, size: int, end: int) -> None:
        if size == 0 and offset < end:  # the master's end is below ours
            if self.config.ha_slave_truncate_divergent:
                self.store.truncate_replica(offset)
                self.diverged = None
                return
            raise Diverged(f"this slave's log ends at {end}, its master's at {offset}: it holds "
                           f"{end - offset} bytes the master never had. Refusing to replicate; set "
                           f"haSlaveTruncateDivergent=true to cut them, or start this slave anew")
        raise ReplicaMismatch(f"the master sent {size} bytes at {offset}, this log ends at {end}")

    def runtime_info(self) -> dict[str, object]:
        end = self.store.commitlog.max_offset
        return {"masterAddress": self.master_address, "connected": self.connected,
                "slaveOffset": end, "masterOffset": self.master_offset,
                "lagBytes": max(0, self.master_offset - end) if self.master_offset >= 0 else -1,
                "lastFrameMs": int(self.last_frame * 1000), "diverged": self.diverged or "",
                "lagMs": self.store.replica_lag.text()}


class _CatchUp:
    """While the master streams a backlog (full frames: haTransferBatchSize, or up to a
    segment's end), a log line every PROGRESS_INTERVAL_S with this log's end, the bytes
    copied, MB/s and, when SlaveSynchronize has learnt the master's log end, at least how
    far behind (that end only grows); and one when a frame is not full (the master sent all
    it had)."""

    def __init__(self, slave: HASlave) -> None:
        self.slave, self.master = slave, slave.master_address
        self.batch, self.segment = slave.config.ha_transfer_batch_size, slave.config.mapped_file_size_commit_log
        self.began = self.last = -1.0
        self.start = 0
        self.logged = False

    def at(self, offset: int, size: int, now: float) -> None:
        """A frame of ``size`` bytes at ``offset`` was appended (0: the master's heart-beat)."""
        end = offset + size
        if size < self.batch and (size == 0 or end % self.segment):  # the master had no more
            if self.logged:
                log.info("HA: caught up with master %s at CommitLog offset %d: %.1f MB in %.1f s, %.1f MB/s",
                         self.master, end, (end - self.start) / 1e6, now - self.began, self._rate(end, now))
            self.began, self.logged = -1.0, False
        elif self.began < 0:
            self.began = self.last = now
            self.start = offset
        elif now - self.last >= PROGRESS_INTERVAL_S:
            self.last, self.logged = now, True
            slave = self.slave
            behind = (f", at least {slave.master_log_end - end} bytes behind (the master's log end "
                      f"{now - slave.master_log_end_at:.0f} s ago)" if slave.master_log_end > end else "")
            log.info("HA: catching up from master %s: CommitLog offset %d, %.1f MB copied, %.1f MB/s%s",
                     self.master, end, (end - self.start) / 1e6, self._rate(end, now), behind)

    def _rate(self, end: int, now: float) -> float:
        return (end - self.start) / max(now - self.began, 1e-9) / 1e6


async def _wait_any(stop: asyncio.Event, changed: asyncio.Event, timeout: float | None) -> None:
    waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(changed.wait())}
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
