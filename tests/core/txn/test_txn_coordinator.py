"""The core's in-place transactions without a protocol: the Broker facade's coordinator, its
read rule for every reader, and its log across a restart (a torn line, a compaction)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.core.broker import Broker
from rocketport.core.errors import DiskFull
from rocketport.core.store.get_result import GetStatus
from rocketport.core.txn.coordinator import TxnCoordinator, TxnState
from rocketport.core.txn.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)
from rocketport.core.txn.visibility import Isolation
from tests.support.aio import run


async def write(broker: Broker, pid: int, epoch: int, value: bytes, *, queue_id: int = 0) -> int:
    """A transactional batch of one record, as a front-end stores it."""
    broker.check_transactional_write(pid, epoch, "T", queue_id)
    batch = build_batch([Record(0, 0, None, value)], base_timestamp=int(time.time() * 1000),
                        producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
    return (await broker.put_record_batch("T", queue_id, batch, 1)).queue_offset


async def plain(broker: Broker, value: bytes) -> int:
    batch = build_batch([Record(0, 0, None, value)], base_timestamp=int(time.time() * 1000))
    return (await broker.put_record_batch("T", 0, batch, 1)).queue_offset


async def end_txn(broker: Broker, transactional_id: str, *args: object, **kwargs: object) -> tuple[int, int]:
    """EndTxn, and then its markers: it is answered once its prepare line is logged, and the
    markers are written right after (a test reading at once waits for them here)."""
    answer = await broker.end_txn(transactional_id, *args, **kwargs)
    completion = broker.transaction(transactional_id).completion
    if completion is not None:
        await completion
    return answer


def bodies(broker: Broker, isolation: Isolation = Isolation.VISIBLE) -> list[bytes]:
    result = broker.get_messages("T", 0, 0, 100, isolation=isolation)
    return [m.body for m in result.messages()]


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_visibility_for_every_reader_and_the_kafka_views(small_config, flush):
    config = dataclasses.replace(small_config, flush_disk_type=flush)  # SYNC: the log fsynced too

    async def main() -> None:
        async with Broker(config) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            pid, epoch = await broker.init_transactional_producer("t1", 60_000)
            await broker.add_partitions_to_txn("t1", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"aborted")
            await plain(broker, b"plain-1")
            assert bodies(broker) == [] and broker.last_stable_offset("T", 0) == 0
            await end_txn(broker, "t1", pid, epoch, False)
            assert bodies(broker) == [b"plain-1"]  # the aborted record and the marker are gone
            assert broker.get_messages("T", 0, 0, 100).max_offset == 3
            assert [(r.producer_id, r.first_offset, r.last_offset)
                    for r in broker.aborted_transactions("T", 0, 0, 3)] == [(pid, 0, 2)]
            await broker.add_partitions_to_txn("t1", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"committed")
            held = broker.get_messages("T", 0, 3, 100)
            assert held.status is GetStatus.OFFSET_OVERFLOW_ONE and held.max_offset == 3
            await end_txn(broker, "t1", pid, epoch, True)
            assert bodies(broker) == [b"plain-1", b"committed"]
            raw = [m.body for m in broker.get_messages("T", 0, 0, 100, isolation=Isolation.KAFKA_UNCOMMITTED)
                   .messages()]
            assert raw[:2] == [b"aborted", b"plain-1"] and len(raw) == 5  # markers included
            # the other queue never saw a transaction: no state, reads unchanged
            assert ("T", 1) not in broker.txn_queues

    run(main())


def test_coordinator_refusals(small_config):
    async def main() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            with pytest.raises(InvalidTransactionTimeout):
                await broker.init_transactional_producer("t", 900_001)
            pid, epoch = await broker.init_transactional_producer("t", 1000)
            with pytest.raises(InvalidTxnState):
                await end_txn(broker, "t", pid, epoch, True)  # nothing open
            with pytest.raises(InvalidTxnState):
                await write(broker, pid, epoch, b"x")  # partition not added
            with pytest.raises(InvalidProducerIdMapping):
                await broker.add_partitions_to_txn("t", pid + 1, epoch, [("T", 0)])
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            with pytest.raises(InvalidTxnState):
                await broker.txn_offset_commit("t", pid, epoch, "g", [("T", 0, 5, None)])  # group not added
            pid2, epoch2 = await broker.init_transactional_producer("t", 1000)
            assert (pid2, epoch2) == (pid, epoch + 2)  # one epoch fenced the open one's abort
            with pytest.raises(ProducerFenced):
                await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            with pytest.raises(ProducerFenced):
                await broker.init_transactional_producer("t", 1000, pid, epoch)  # KIP-360 with a stale epoch
            meta = broker.transaction("t")
            await meta.lock.acquire()  # as while its markers are being written
            with pytest.raises(ConcurrentTransactions):
                await broker.add_partitions_to_txn("t", pid2, epoch2, [("T", 0)])
            meta.lock.release()

    run(main())


def test_restart_keeps_open_transactions_closed_and_aborted_ranges(small_config):
    async def first_run() -> int:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 60_000)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"aborted")
            await end_txn(broker, "t", pid, epoch, False)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"open-before")
            await plain(broker, b"plain")
            return pid

    async def second_run(pid: int) -> None:
        async with Broker(small_config) as broker:
            assert bodies(broker) == []  # the open transaction holds the LSO at offset 2
            assert broker.last_stable_offset("T", 0) == 2
            epoch = broker.transaction("t").producer_epoch
            await write(broker, pid, epoch, b"open-after")  # the producer goes on after the restart
            assert broker.last_stable_offset("T", 0) == 2  # still from the logged bound
            await end_txn(broker, "t", pid, epoch, True)
            assert bodies(broker) == [b"open-before", b"plain", b"open-after"]

    async def third_run() -> None:
        async with Broker(small_config) as broker:
            broker.txn.log.compact_after = 0  # the next completion rewrites the log
            pid, epoch = await broker.init_transactional_producer("t", 60_000)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await end_txn(broker, "t", pid, epoch, True)
            assert broker.txn.log.lines == 2  # the snapshot: allocator and ranges, one id
        with open(broker.txn.log.path, "r+b") as f:
            f.seek(f.read().index(b"\0"))  # where the lines end (zeros follow)
            f.write(b'{"id": "t", "pid"')  # a copy cut short by a crash
        async with Broker(small_config) as broker:
            assert bodies(broker) == [b"open-before", b"plain", b"open-after"]  # still no "aborted"
            assert [r.first_offset for r in broker.aborted_transactions("T", 0, 0, 100)] == [0]

    pid = run(first_run())
    run(second_run(pid))
    run(third_run())


def test_a_topic_deleted_and_created_again_starts_without_old_aborted_ranges(small_config):
    async def main() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 60_000)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"aborted")
            await end_txn(broker, "t", pid, epoch, False)
            broker.delete_topic("T")
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            assert await write(broker, pid, epoch, b"new") == 0  # the old range's offsets again
            await end_txn(broker, "t", pid, epoch, True)
            assert bodies(broker) == [b"new"]
        async with Broker(small_config) as broker:  # and so after a restart
            assert bodies(broker) == [b"new"]

    run(main())


def test_exhausted_epochs_abort_under_the_old_producer_id_then_move_on(small_config):
    async def main() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, _ = await broker.init_transactional_producer("t", 60_000)
            meta = broker.transaction("t")
            meta.producer_epoch = epoch = 32766  # as after 32,766 restarts of the producer
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"open")
            new_pid, new_epoch = await broker.init_transactional_producer("t", 60_000)
            assert new_pid != pid and new_epoch == 0
            assert [(r.producer_id, r.first_offset) for r in broker.aborted_transactions("T", 0, 0, 10)] == [(pid, 0)]
            assert bodies(broker) == []
            await broker.add_partitions_to_txn("t", new_pid, new_epoch, [("T", 0)])
            await write(broker, new_pid, new_epoch, b"next")
            await end_txn(broker, "t", new_pid, new_epoch, True)
            assert bodies(broker) == [b"next"]

    run(main())


def test_an_open_transaction_times_out_across_a_restart(small_config):
    async def first_run() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 1000)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"never")
            await plain(broker, b"plain")

    async def second_run() -> None:
        async with Broker(small_config) as broker:
            assert bodies(broker) == [] and broker.transaction("t").state.value == "Ongoing"
            # its start time was logged: the timeout runs on, and the coordinator's check
            # (every second) aborts it
            for _ in range(50):
                if broker.transaction("t").state.value == "CompleteAbort":
                    break
                await asyncio.sleep(0.1)
            assert broker.transaction("t").state.value == "CompleteAbort"
            assert bodies(broker) == [b"plain"]

    run(first_run())
    run(second_run())


def test_the_maximum_timeout_is_configured(small_config):
    config = dataclasses.replace(small_config, transaction_max_timeout_ms=5000)

    async def main() -> None:
        async with Broker(config) as broker:
            with pytest.raises(InvalidTransactionTimeout):
                await broker.init_transactional_producer("t", 5001)
            assert await broker.init_transactional_producer("t", 5000) == (1 << 32, 0)

    run(main())


def test_end_txn_is_answered_before_its_markers_and_readers_and_the_next_transaction_wait(small_config):
    """EndTxn is answered once its prepare line is logged, its markers written right after:
    until then the queue's LSO holds, and the id's next transaction waits for them, so its
    records come after the marker. A broker stopped at once still writes them."""
    async def main() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 60_000)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"first")
            await broker.end_txn("t", pid, epoch, True)
            assert broker.transaction("t").state.value == "PrepareCommit"
            assert bodies(broker) == [] and broker.last_stable_offset("T", 0) == 0
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])  # waits for the marker
            assert bodies(broker) == [b"first"]
            await write(broker, pid, epoch, b"second")
            raw = broker.get_messages("T", 0, 0, 10, isolation=Isolation.KAFKA_UNCOMMITTED)
            assert [m.body for m in raw.messages()][::2] == [b"first", b"second"] and raw.max_offset == 3
            await broker.end_txn("t", pid, epoch, False)
        assert broker.transaction("t").state.value == "CompleteAbort"
        async with Broker(small_config) as broker:
            assert bodies(broker) == [b"first"]

    run(main())


def test_a_marker_the_store_refuses_leaves_the_transaction_prepared_until_it_is_written(tmp_path):
    """A full disk refusing an abort marker must not end the transaction without it (its
    records would lose their aborted range): it stays prepared, readers held, and the id's
    next request writes the markers again."""
    async def main() -> None:
        refuse, written = [True], []

        async def put_markers(queues: list[tuple[str, int]], batch: bytes, timestamp: int) -> list[int]:
            if refuse[0]:
                raise DiskFull("no space left")
            written.extend(queues)
            return [7] * len(queues)

        coordinator = TxnCoordinator(str(tmp_path), put_markers=put_markers, max_offset=lambda t, q: 5,
                                     min_offset=lambda t, q: 0, commit_offset=lambda *a: None,
                                     offsets_durable=asyncio.sleep, notify=lambda *a: None, sync=False)
        coordinator.load()
        pid, epoch = await coordinator.init_producer("t", 60_000)
        await coordinator.add_partitions("t", pid, epoch, [("T", 0)])
        coordinator.before_write(pid, epoch, "T", 0)
        await coordinator.end_txn("t", pid, epoch, False)
        await coordinator.transactions["t"].completion
        assert coordinator.transactions["t"].state is TxnState.PREPARE_ABORT
        assert coordinator.queues[("T", 0)].lso(7) == 5 and not coordinator.queues[("T", 0)].aborted
        refuse[0] = False
        await coordinator.add_partitions("t", pid, epoch, [("T", 0)])  # writes them, then goes on
        assert written == [("T", 0)] and coordinator.transactions["t"].state is TxnState.ONGOING
        assert [(r.first_offset, r.last_offset) for r in coordinator.queues[("T", 0)].aborted] == [(5, 7)]
        coordinator.close()

    run(main())


def test_markers_keys_stay_out_of_the_key_index(small_config):
    """A transaction marker's record key (version and type, four octets) is no message's
    key: the index builder skips marker batches, and still indexes the records' own keys."""
    async def main() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 60_000)
            for commit in (False, True):
                await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
                broker.check_transactional_write(pid, epoch, "T", 0)
                batch = build_batch([Record(0, 0, b"order-%d" % commit, b"v")],
                                    base_timestamp=int(time.time() * 1000), producer_id=pid,
                                    producer_epoch=epoch, base_sequence=commit, transactional=True)
                await broker.put_record_batch("T", 0, batch, 1)
                await end_txn(broker, "t", pid, epoch, commit)
            store = broker.store
            for _ in range(500):
                if store.index.built_offset >= store.dispatched_offset:
                    break
                await asyncio.sleep(0.01)
            assert store.index.built_offset >= store.dispatched_offset
            assert [m.body for m in broker.query_by_key("T", "order-1")] == [b"v"]
            for marker_key in ("\x00\x00\x00\x00", "\x00\x00\x00\x01"):  # abort, commit
                assert broker.query_by_key("T", marker_key) == []

    run(main())


def test_v2_ends_bump_the_epoch_fence_late_writes_and_answer_retries(small_config):
    """The transaction protocol v2 (KIP-890 part 2): each end moves the epoch on (the markers
    carry the new one), a write of the ended epoch is fenced, a retried end is answered again,
    an abort with nothing open still bumps, and the bumps survive a restart."""
    async def first_run() -> tuple[int, int]:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 60_000)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"first")
            assert await end_txn(broker, "t", pid, epoch, True, bump=True) == (pid, epoch + 1)
            marker = broker.get_messages("T", 0, 1, 1, isolation=Isolation.KAFKA_UNCOMMITTED)
            assert marker.message_count == 1  # the commit marker, of the new epoch
            with pytest.raises(ProducerFenced):
                await write(broker, pid, epoch, b"late")  # the ended transaction's epoch
            # the answer was lost: the retry (old epoch) is answered with the new one
            assert await end_txn(broker, "t", pid, epoch, True, bump=True) == (pid, epoch + 1)
            with pytest.raises(InvalidTxnState):
                await end_txn(broker, "t", pid, epoch + 1, True, bump=True)  # no commit with nothing open
            assert await end_txn(broker, "t", pid, epoch + 1, False, bump=True) == (pid, epoch + 2)
            await broker.add_partitions_to_txn("t", pid, epoch + 2, [("T", 0)])
            await write(broker, pid, epoch + 2, b"aborted")
            assert await end_txn(broker, "t", pid, epoch + 2, False, bump=True) == (pid, epoch + 3)
            assert bodies(broker) == [b"first"]
            return pid, epoch + 3

    async def second_run(pid: int, epoch: int) -> None:
        async with Broker(small_config) as broker:
            assert (broker.transaction("t").producer_id, broker.transaction("t").producer_epoch) == (pid, epoch)
            assert await end_txn(broker, "t", pid, epoch - 1, False, bump=True) == (pid, epoch)  # a retry
            meta = broker.transaction("t")
            meta.producer_epoch = 32766  # the last epoch: the end moves the producer id on
            await broker.add_partitions_to_txn("t", pid, 32766, [("T", 0)])
            await write(broker, pid, 32766, b"last")
            new_pid, new_epoch = await end_txn(broker, "t", pid, 32766, True, bump=True)
            assert new_pid != pid and new_epoch == 0
            assert await end_txn(broker, "t", pid, 32766, True, bump=True) == (new_pid, 0)  # a retry
            assert bodies(broker) == [b"first", b"last"]

    run(second_run(*run(first_run())))


def test_a_v2_abort_after_a_timeout_is_answered_with_the_fenced_epoch(small_config):
    """A timed-out transaction is aborted and its producer fenced; the v2 producer's own abort
    (with the old epoch) then succeeds with the new one, its commit stays fenced."""
    async def main() -> None:
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            pid, epoch = await broker.init_transactional_producer("t", 1)
            await broker.add_partitions_to_txn("t", pid, epoch, [("T", 0)])
            await write(broker, pid, epoch, b"timed out")
            await asyncio.sleep(0.01)
            assert await broker.txn.abort_expired() == 1
            with pytest.raises(ProducerFenced):
                await end_txn(broker, "t", pid, epoch, True, bump=True)
            assert await end_txn(broker, "t", pid, epoch, False, bump=True) == (pid, epoch + 1)
            with pytest.raises(ProducerFenced):
                await end_txn(broker, "t", pid, epoch, False)  # v1: fenced, as before
            assert bodies(broker) == []

    run(main())
