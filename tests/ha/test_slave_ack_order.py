"""A slave acknowledges the bytes it read once they are in its CommitLog, before it
dispatches them (RocketMQ's HAClient order: a SYNC_MASTER's send waits for the slave's
write, not for its ConsumeQueues and key index); dispatch still follows in the same read,
so a reader of the slave never sees the log ahead of its queues for long."""

from __future__ import annotations

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.core.ha import slave as slave_module
from rocketport.core.ha.codec import REPORT, encode_frame_header
from rocketport.core.ha.slave import _Stream
from rocketport.core.store.replica import pwrite_replicated
from tests.ha.test_replica_store import caught_up, configs, digest, fill
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


def test_a_catch_up_written_aside_is_the_masters_log_and_dispatched(tmp_path, monkeypatch):
    """Large reads are written by the worker thread while the loop dispatches the read
    before (core/ha/slave.py ASIDE_MIN); across segment ends the reads go piece by piece."""
    asides: list[int] = []

    def counted(mf, parts):
        asides.append(sum(len(p) for p in parts))
        pwrite_replicated(mf, parts)
    monkeypatch.setattr(slave_module, "pwrite_replicated", counted)

    async def scenario() -> None:
        port = free_port()
        common = {"mappedFileSizeCommitLog": 4 << 20}
        mc = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "m"),
                                        "brokerRole": "ASYNC_MASTER", "haListenPort": port})
        sc = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "s"),
                                        "brokerRole": "SLAVE", "brokerId": 1,
                                        "haMasterAddress": f"127.0.0.1:{port}"})
        async with Broker(mc) as master:
            await master.create_topic_ready("T", read_queue_nums=4, write_queue_nums=4)
            for i in range(12):  # 12 MiB: three segments
                await master.put_messages([Message("T", bytes(1000), {"KEYS": f"k{i}-{j}"}, 0, i % 4)
                                           for j in range(1024)])
            end = master.store.commitlog.max_offset
            async with Broker(sc) as slave:
                await caught_up(master, slave)
                assert asides  # some reads went aside
                assert digest(slave, end) == digest(master, end)
                for key, cq in master.store.consume_queues.items():
                    assert slave.store.consume_queues[key].max_offset == cq.max_offset
                for key in ("k0-0", "k5-512", "k11-1023"):  # each read's keys are indexed
                    assert [m.keys for m in slave.query_by_key("T", key)] == [[key]]
    run(scenario())


def test_a_large_read_left_undispatched_is_dispatched_by_the_next_read(tmp_path):
    """A full frame read whole is written aside and its dispatch waits for the next read:
    a heart-beat alone (nothing appended) dispatches it too."""
    async def scenario() -> None:
        batch = 256 << 10
        common = {"mappedFileSizeCommitLog": 4 << 20}
        mc = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "m"),
                                        "brokerRole": "ASYNC_MASTER", "haListenPort": free_port()})
        sc = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "s"),
                                        "brokerRole": "SLAVE", "brokerId": 1, "haTransferBatchSize": batch})
        async with Broker(mc) as master, Broker(sc) as slave:  # the slave follows no master
            await master.create_topic_ready("T")
            await master.put_messages([Message("T", bytes(1000), {}, 0, 0) for _ in range(400)])
            log = master.store.commitlog.slice(0, batch)
            store, transport = slave.store, _Transport()
            stream = _Stream(slave.ha.slave)
            stream.connection_made(transport)  # type: ignore[arg-type]
            for frame in (encode_frame_header(0, batch) + log, encode_frame_header(batch, 0)):
                stream.buffer[:len(frame)] = frame
                stream.buffer_updated(len(frame))
                if len(frame) > batch:  # written, acknowledged, its dispatch left for later
                    assert transport.reports == [batch] and store.dispatched_offset == 0
            assert 0 < store.dispatched_offset <= batch  # up to the last whole record
            assert store.consume_queues[("T", 0)].max_offset > 200  # of the 1 KiB records in it
            stream.settle()
    run(scenario())
