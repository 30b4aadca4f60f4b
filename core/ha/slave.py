"""The slave's HA client (RocketMQ's HAService.HAClient).

Connects to the master's HA port (haMasterAddress, else the address the name server's
register answer named), reports this log's end on connect, after every append and at least
every haSendHeartbeatInterval, and appends each frame's bytes at the offset it names as
they are read, without copying them first (`_Stream`; `MessageStore.write_replicated`:
byte-identical), and dispatches them as recovery dispatches once the report is on its way
(`MessageStore.dispatch_replicated`). A frame for another offset ends the connection,
except the master's answer to a slave that is ahead of it (an empty frame at the master's
end, below ours): with haSlaveTruncateDivergent the log is cut back to it, else every
attempt is refused and logged until an operator decides. Reconnects after a pause while
the broker runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, cast

from ..config import BrokerConfig
from ..store.message_store import MessageStore
from ..store.replica import ReplicaMismatch, pwrite_replicated
from .codec import FrameReader, HAProtocolError, encode_report

log = logging.getLogger(__name__)

RECONNECT_S = 1.0  # between attempts (RocketMQ's HAClient waits 5 s; tests want less)
DIVERGED_RETRY_S = 30.0  # a diverged slave asks again (and logs again) this often
PROGRESS_INTERVAL_S = 5.0  # a catch-up says where it is this often
# A read this large (a catch-up's) is written by a worker thread while the loop dispatches
# the read before it (the write is system calls, the dispatch Python: two cores at work);
# its own dispatch waits for the next read, or DISPATCH_LATER_S if none follows.
ASIDE_MIN = 256 << 10
DISPATCH_LATER_S = 0.002
_writer: ThreadPoolExecutor | None = None  # made on a first large read


def _writer_thread() -> ThreadPoolExecutor:
    global _writer
    if _writer is None:
        _writer = ThreadPoolExecutor(1, thread_name_prefix="ha-slave-write")
    return _writer


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
        self._transport: asyncio.Transport | None = None
        self.local_address = ""  # this end of the HA connection (how an elected master knows us)
        # told when a connection to the master ends or a connect fails (not on stop or a
        # change of master): the election may look for proof that the master died
        self.on_link_lost: Callable[[], None] = lambda: None

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
        if self._transport is not None:
            self._transport.close()

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
                if not stop.is_set() and not self._changed.is_set():
                    self.on_link_lost()  # reset, closed, refused or silent: maybe dead (a hint)
            except Exception:  # a bug of ours: said, and tried again, not a silent end of replication
                log.exception("HA: replication from %s failed", self.master_address)
            finally:
                self.connected = False
                self._transport = None
            await _wait_any(stop, self._changed, DIVERGED_RETRY_S if self.diverged else RECONNECT_S)
            self._changed.clear()

    async def _session(self, stop: asyncio.Event) -> None:
        host, _, port = self.master_address.rpartition(":")
        stream = _Stream(self)
        transport, _ = await asyncio.wait_for(
            asyncio.get_running_loop().create_connection(lambda: stream, host, int(port)), 5)
        self._transport = transport
        local = transport.get_extra_info("sockname") or ("", 0)
        self.local_address = f"{local[0]}:{local[1]}"
        try:
            self.connected = True
            log.info("HA: connected to master %s at offset %d", self.master_address,
                     self.store.commitlog.max_offset)
            stream.report()
            beat_s = self.config.ha_send_heartbeat_interval / 1000
            silent_s = self.config.ha_housekeeping_interval / 1000
            stopped = asyncio.ensure_future(stop.wait())
            try:
                while not stop.is_set():
                    await asyncio.wait((stream.closed, stopped), timeout=min(beat_s, silent_s),
                                       return_when=asyncio.FIRST_COMPLETED)
                    if stream.closed.done():
                        raise stream.closed.result()
                    if self.last_frame and time.time() - self.last_frame > silent_s:
                        raise asyncio.TimeoutError(f"no frame from the master for {silent_s * 1000:.0f} ms")
                    if time.monotonic() - stream.reported >= beat_s:
                        stream.report()
            finally:
                stopped.cancel()
        finally:
            stream.settle()
            transport.close()

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


class _Stream(asyncio.BufferedProtocol):
    """One connection's reads: the socket reads into one buffer, and each read's frame
    bytes go to the log as they come (`FrameReader`'s pieces, `MessageStore.write_replicated`),
    followed by a report of the new end, then their dispatch: a byte is copied by the socket
    read and the log write only, and the stream waits while the store works (the loop reads
    no more). A large read (a catch-up's, ASIDE_MIN) is written by a worker thread while the
    loop dispatches the read before it. ``closed`` holds why the connection ended: the
    exception the session raises."""

    def __init__(self, slave: HASlave) -> None:
        self.slave, self.store = slave, slave.store
        # a few of the master's frames a read (whatever the socket holds)
        self.buffer = memoryview(bytearray(4 * slave.config.ha_transfer_batch_size))
        self.frames = FrameReader()
        self.catch_up = _CatchUp(slave)
        self.closed: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.reported = 0.0  # when the last report was sent (monotonic)
        self._later: asyncio.TimerHandle | None = None  # the dispatch of a large read, when none follows

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._read(self.buffer[:nbytes])
        except Exception as exc:  # the session raises it (run() says which end a connection)
            self._end(exc)
            assert self.transport is not None
            self.transport.close()

    def _read(self, data: memoryview) -> None:
        slave, store = self.slave, self.store
        appended = False
        now = time.monotonic()
        slave.last_frame = time.time()
        pieces = self.frames.feed(data)
        later = self._later  # this read dispatches what the last one wrote
        if later is not None:
            later.cancel()
            self._later = None
        owed = later is not None
        if len(data) >= ASIDE_MIN and self._write_aside(pieces):
            for offset, piece, frame_size in pieces:
                self._frame_end(offset, piece, frame_size, now)
            self.report()
            last = pieces[-1][2]
            if last < 0 or last == slave.config.ha_transfer_batch_size:  # more is on its way
                self._later = asyncio.get_running_loop().call_later(DISPATCH_LATER_S, self._dispatch_later)
            else:
                store.dispatch_replicated()
            return
        try:
            for offset, piece, frame_size in pieces:
                end = store.commitlog.max_offset
                if offset != end:
                    slave._mismatch(offset, len(piece), end)
                if piece:
                    store.write_replicated(offset, piece)
                    appended = True
                self._frame_end(offset, piece, frame_size, now)
            if appended:  # acknowledged once in the log, as RocketMQ's slave does: a
                self.report()  # SYNC_MASTER's send does not wait for this dispatch
        finally:
            if appended or owed:
                store.dispatch_replicated()

    def _frame_end(self, offset: int, piece: memoryview, frame_size: int, now: float) -> None:
        if frame_size >= 0:  # a frame ends with this piece
            slave = self.slave
            slave.master_offset = offset + len(piece)
            self.catch_up.at(slave.master_offset - frame_size, frame_size, now)

    def _write_aside(self, pieces: list[tuple[int, memoryview, int]]) -> bool:
        """Write a read's bytes (consecutive from the log's end, into one segment) from the
        worker thread while this one dispatches the reads before; False, nothing done, for
        a read that does not fit that (`_read` then goes piece by piece, and says what is
        wrong)."""
        store = self.store
        end = store.commitlog.max_offset
        size = 0
        for offset, piece, _ in pieces:
            if offset != end + size:
                return False
            size += len(piece)
        mf = store.segment_for_replicated(end, size) if size else None
        if mf is None:
            return False
        job = _writer_thread().submit(pwrite_replicated, mf, [piece for _, piece, _ in pieces if piece])
        try:
            store.dispatch_replicated()  # up to the log's end, which has not moved yet
        finally:
            job.result()
        store.wrote_replicated(mf, size)
        return True

    def _dispatch_later(self) -> None:
        self._later = None
        try:
            self.store.dispatch_replicated()
        except Exception as exc:  # as buffer_updated: the session raises it
            self._end(exc)
            assert self.transport is not None
            self.transport.close()

    def settle(self) -> None:
        """Dispatch what a large read left for the next one (the connection ends)."""
        if self._later is not None:
            self._later.cancel()
            self._later = None
            try:
                self.store.dispatch_replicated()
            except Exception as exc:
                log.warning("HA: dispatch of the replicated log failed: %s", exc)

    def report(self) -> None:
        """Tell the master where this log ends (its acknowledgement, and where to send from)."""
        assert self.transport is not None
        self.transport.write(encode_report(self.store.commitlog.max_offset))
        self.reported = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self.settle()
        self._end(exc or OSError("the master closed the connection"))

    def _end(self, exc: BaseException) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)


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
