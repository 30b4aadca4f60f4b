"""The master's HA port (RocketMQ's HAService AcceptSocketService and HAConnection).

One `SlaveConnection` per slave: its reports (codec.ReportDecoder) say where its log ends
and what it has acknowledged; the push loop sends the CommitLog from there in frames of up
to haTransferBatchSize bytes, never across a segment's end, woken by every dispatch, with a
heart-beat frame after haSendHeartbeatInterval of silence. A slave that reports an offset
beyond this log's end holds bytes this master never had: it is answered with one empty
frame at this log's end (it then truncates or refuses, as it is configured) and dropped. A
slave silent for haHousekeepingInterval is dropped. Garbage on the port drops that
connection only. Both intervals are kept by one housekeeping task for every slave, not by a
timeout on each read and each wait (SYNC_MASTER has a report and a wake-up per send).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import BrokerConfig
from ..store.message_store import MessageStore
from .codec import HAProtocolError, ReportDecoder, encode_frame_header
from .transfer import GroupTransfer

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SlaveState:
    """What the master knows of one slave (clusterList and brokerStatus show it)."""

    address: str
    connected_at: float
    acked: int = -1  # its log's end as last reported; -1 before the first report
    last_report: float = 0.0
    pushed: int = -1  # where the next frame starts
    ack_times: list[float] = field(default_factory=list)
    silent: bool = False  # dropped by the housekeeping: no report for haHousekeepingInterval


class HAMaster:
    def __init__(self, config: BrokerConfig, store: MessageStore, transfer: GroupTransfer,
                 on_connect: Callable[[], object] | None = None) -> None:
        self.config = config
        self.on_connect = on_connect
        self.store = store
        self.transfer = transfer
        self.slaves: dict[asyncio.StreamWriter, SlaveState] = {}
        self._server: asyncio.base_events.Server | None = None
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        # whose acknowledgements SYNC_MASTER counts: every slave's, or under an election only
        # the in-sync set's members' (core/ha/election.py: only they may be elected)
        self.counts: Callable[[SlaveState], bool] = lambda _state: True

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        host = self.config.bind_address
        self._server = await asyncio.start_server(self._serve, host, self.config.ha_port,
                                                  limit=1 << 16)
        self.port = self._server.sockets[0].getsockname()[1]
        self.store.dispatch_listeners.append(self._dispatched)
        self._tasks.add(asyncio.create_task(self._housekeep(), name="ha-housekeeping"))
        log.info("HA: listening for slaves on %s:%d", host, self.port)

    async def stop(self) -> None:
        if self._dispatched in self.store.dispatch_listeners:
            self.store.dispatch_listeners.remove(self._dispatched)
        if self._server is not None:
            self._server.close()
        for writer in list(self.slaves):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def _dispatched(self, _topic: str, _queue_id: int, _max: int) -> None:
        if not self._wake.is_set():
            self._wake.set()

    async def _housekeep(self) -> None:
        """A quarter of the shorter interval at a time: wake the push loops (one whose slave
        heard nothing for haSendHeartbeatInterval sends a heart-beat) and drop the slaves
        that reported nothing for haHousekeepingInterval."""
        beat_s = self.config.ha_send_heartbeat_interval / 1000
        silent_s = self.config.ha_housekeeping_interval / 1000
        while True:
            await asyncio.sleep(min(beat_s, silent_s) / 4)
            self._wake.set()
            now = time.time()
            for writer, state in list(self.slaves.items()):
                if not state.silent and now - (state.last_report or state.connected_at) > silent_s:
                    state.silent = True
                    writer.close()  # its report reader sees the end; _serve says why

    # -- who is in sync ---------------------------------------------------------------------
    def in_sync(self, end: int) -> bool:
        """RocketMQ's isSlaveOK: a slave is connected and within haSlaveFallbehindMax."""
        best = max((s.acked for s in self.slaves.values() if self.counts(s)), default=-1)
        return best >= 0 and end - best < self.config.ha_slave_fallbehind_max

    def slave_is_in_sync(self, state: SlaveState) -> bool:
        return state.acked >= 0 and self.store.commitlog.max_offset - state.acked < \
            self.config.ha_slave_fallbehind_max

    # -- one slave --------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        # a few frames in flight: drain() must not wait for the socket to empty after each
        writer.transport.set_write_buffer_limits(high=4 * self.config.ha_transfer_batch_size)
        state = SlaveState(f"{peer[0]}:{peer[1]}", time.time())
        self.slaves[writer] = state
        log.info("HA: slave %s connected", state.address)
        if self.on_connect is not None:
            self.on_connect()
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        pusher = asyncio.create_task(self._push(state, writer), name=f"ha-push-{state.address}")
        self._tasks.add(pusher)
        try:
            await self._read_reports(state, reader, pusher)
        except HAProtocolError as exc:
            log.warning("HA: slave %s sent bytes that are not the HA protocol (%s): dropped",
                        state.address, exc)
        except (OSError, asyncio.IncompleteReadError) as exc:
            log.info("HA: slave %s: %s", state.address, exc or type(exc).__name__)
        finally:
            if state.silent:
                log.warning("HA: slave %s silent for %d ms: dropped", state.address,
                            self.config.ha_housekeeping_interval)
            self.slaves.pop(writer, None)
            pusher.cancel()
            await asyncio.gather(pusher, return_exceptions=True)
            writer.close()
            self._tasks.discard(pusher)
            self._tasks.discard(task)
            best = max((s.acked for s in self.slaves.values() if self.counts(s)), default=0)
            self.transfer.reset(best)
            log.info("HA: slave %s disconnected at offset %d", state.address, state.acked)

    async def _read_reports(self, state: SlaveState, reader: asyncio.StreamReader,
                            pusher: asyncio.Task[None]) -> None:
        decoder = ReportDecoder()
        while True:
            data = await reader.read(1 << 16)  # a silent slave: closed by _housekeep
            if not data:
                return
            offsets = decoder.feed(data)
            if not offsets:
                continue
            offset = offsets[-1]
            state.last_report = time.time()
            log_end = self.store.commitlog.max_offset
            if state.pushed < 0:  # the first report: where the stream starts
                if offset > log_end:
                    log.error("HA: slave %s reports offset %d beyond this log's end %d: it holds bytes "
                              "this master never had; told to truncate or stop", state.address,
                              offset, log_end)
                    await self._send_end_and_close(state, log_end, pusher)
                    return
                if offset == 0 or offset < self.store.commitlog.min_offset:
                    start = self.store.commitlog.min_offset
                else:
                    start = offset
                state.pushed = start
                self._wake.set()
            if offset > log_end:
                raise HAProtocolError(f"acknowledged {offset}, beyond this log's end {log_end}")
            state.acked = offset
            if self.counts(state):
                self.transfer.acknowledged(offset)

    async def _send_end_and_close(self, state: SlaveState, log_end: int,
                                  pusher: asyncio.Task[None]) -> None:
        pusher.cancel()
        await asyncio.gather(pusher, return_exceptions=True)
        writers = [w for w, s in self.slaves.items() if s is state]
        for writer in writers:
            writer.write(encode_frame_header(log_end, 0))
            try:
                await asyncio.wait_for(writer.drain(), 5)
            except (OSError, asyncio.TimeoutError):
                pass

    async def _push(self, state: SlaveState, writer: asyncio.StreamWriter) -> None:
        """Stream the log from ``state.pushed``; a heart-beat after a quiet interval."""
        cl = self.store.commitlog
        batch = self.config.ha_transfer_batch_size
        beat_s = self.config.ha_send_heartbeat_interval / 1000
        last_sent = time.monotonic()
        while True:
            if state.pushed < 0 or state.pushed >= cl.max_offset:
                self._wake.clear()
                if state.pushed >= 0 and time.monotonic() - last_sent >= beat_s:
                    writer.write(encode_frame_header(state.pushed, 0))
                    await writer.drain()
                    last_sent = time.monotonic()
                await self._wake.wait()  # a dispatch, a report, or _housekeep
                continue
            start = state.pushed
            mf = cl.queue.find(start)
            if mf is None:  # deleted by retention under the slave: it must start again
                log.error("HA: slave %s needs offset %d, no longer in this log (min %d)",
                          state.address, start, cl.min_offset)
                writer.close()
                return
            pos = start - mf.file_from_offset
            size = min(batch, mf.wrote_position - pos)
            if size <= 0:  # a segment read to its end whose next one is not made yet
                self._wake.clear()
                await asyncio.sleep(0.001)
                continue
            # one send (writev) for the header and the bytes: a frame, one system call
            writer.writelines((encode_frame_header(start, size), mf.view[pos:pos + size]))
            state.pushed = start + size
            last_sent = time.monotonic()
            await writer.drain()

    def runtime_info(self) -> list[dict[str, object]]:
        """Per slave: address, acknowledged offset, lag in bytes, in sync."""
        end = self.store.commitlog.max_offset
        return [{"address": s.address, "ackOffset": s.acked, "lagBytes": max(0, end - s.acked) if s.acked >= 0 else end,
                 "lastReportMs": int(s.last_report * 1000), "inSync": self.slave_is_in_sync(s)}
                for s in self.slaves.values()]
