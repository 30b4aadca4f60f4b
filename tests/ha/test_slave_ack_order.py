"""A slave acknowledges the bytes it read once they are in its CommitLog, before it
dispatches them (RocketMQ's HAClient order: a SYNC_MASTER's send waits for the slave's
write, not for its ConsumeQueues and key index); dispatch still follows in the same read,
so a reader of the slave never sees the log ahead of its queues for long."""

from __future__ import annotations

from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.core.ha.codec import REPORT, encode_frame_header
from rocketport.core.ha.slave import _Stream
from tests.ha.test_replica_store import configs, digest, fill
from tests.support.aio import run
from tests.support.remoting import free_port


class _Transport:
    """What the stream writes (its reports), and whether it was closed."""

    def __init__(self) -> None:
        self.reports: list[int] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.reports += [offset for (offset,) in REPORT.iter_unpack(data)]

    def close(self) -> None:
        self.closed = True


def test_the_slave_reports_its_log_end_before_it_dispatches(tmp_path):
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        sc = BrokerConfig.from_mapping({"storePathRootDir": sc.store_path_root_dir,
                                        "brokerRole": "SLAVE", "brokerId": 1,
                                        "mappedFileSizeCommitLog": sc.mapped_file_size_commit_log})
        async with Broker(mc) as master, Broker(sc) as slave:  # the slave follows no master
            await fill(master, 30)
            end = master.store.commitlog.max_offset
            log = master.store.commitlog.slice(0, end)
            store, transport = slave.store, _Transport()
            stream = _Stream(slave.ha.slave)
            stream.connection_made(transport)  # type: ignore[arg-type]
            seen: list[tuple[list[int], int]] = []  # (reports so far, dispatched offset) at dispatch
            dispatch = store.dispatch_replicated

            def watched() -> None:
                seen.append((list(transport.reports), store.dispatched_offset))
                dispatch()
            store.dispatch_replicated = watched  # type: ignore[method-assign]
            frame = encode_frame_header(0, end) + log
            half = len(frame) // 2
            for part in (frame[:half], frame[half:]):  # two reads, the second ends the frame
                stream.buffer[:len(part)] = part
                stream.buffer_updated(len(part))
            assert not transport.closed
            # each read: its report of the log's new end first, then the dispatch of it
            assert [reports[-1] for reports, _ in seen] == transport.reports
            assert transport.reports[-1] == end == store.commitlog.max_offset
            assert seen[0][1] == 0 and store.dispatched_offset == end
            assert digest(slave, end) == digest(master, end)
            assert store.consume_queues.keys() == master.store.consume_queues.keys()
            for key, cq in master.store.consume_queues.items():
                assert store.consume_queues[key].max_offset == cq.max_offset
    run(scenario())
