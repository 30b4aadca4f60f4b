"""Idempotent-producer state derived from the stored batches: the sequence rules through the
Broker facade, and the table rebuilt at start from a snapshot plus the log after it, from
the log alone, and from the log when a snapshot claims more than the log holds. (SIGKILL
with real clients: tests/protocols/kafka/test_kafka_idempotent_crash.py.)"""

from __future__ import annotations

import contextlib
import os
import shutil
import time

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.core.broker import Broker
from rocketport.core.txn.producer_state import SequenceCheck
from tests.support.aio import run

ACCEPT, DUPLICATE, OUT_OF_ORDER, FENCED = (SequenceCheck.ACCEPT, SequenceCheck.DUPLICATE,
                                           SequenceCheck.OUT_OF_ORDER, SequenceCheck.FENCED)


async def produce(broker: Broker, pid: int, epoch: int, first_seq: int, count: int, queue_id: int = 0,
                  timestamp_ms: int | None = None) -> int:
    """An idempotent batch stored as the Kafka front-end stores it: judged, then put."""
    verdict, offset = broker.check_sequence(pid, epoch, "T", queue_id, first_seq, count)
    if verdict is DUPLICATE:
        return offset
    assert verdict is ACCEPT, verdict
    batch = build_batch([Record(i, 0, None, b"v%d" % (first_seq + i)) for i in range(count)],
                        base_timestamp=timestamp_ms or int(time.time() * 1000), producer_id=pid,
                        producer_epoch=epoch,
                        base_sequence=first_seq)
    return (await broker.put_record_batch("T", queue_id, batch, count)).queue_offset


async def started(config) -> Broker:
    broker = Broker(config)
    await broker.start()
    broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
    return broker


def test_sequences_are_judged_against_what_was_stored(small_config):
    async def scenario():
        broker = await started(small_config)
        try:
            pid = await broker.allocate_producer_id()
            assert await produce(broker, pid, 0, 0, 5) == 0
            assert await produce(broker, pid, 0, 5, 3) == 5
            assert broker.check_sequence(pid, 0, "T", 0, 0, 5) == (DUPLICATE, 0)  # a retry
            assert broker.check_sequence(pid, 0, "T", 0, 5, 3) == (DUPLICATE, 5)
            assert broker.check_sequence(pid, 0, "T", 0, 9, 1)[0] is OUT_OF_ORDER  # 8 is missing
            assert broker.check_sequence(pid, 0, "T", 0, 8, 1)[0] is ACCEPT
            assert broker.check_sequence(pid, 0, "T", 1, 77, 1)[0] is ACCEPT  # another queue: new
            assert broker.check_sequence(pid, 1, "T", 0, 3, 1)[0] is OUT_OF_ORDER  # a new epoch starts at 0
            assert await produce(broker, pid, 1, 0, 2) == 8
            assert broker.check_sequence(pid, 0, "T", 0, 8, 1)[0] is FENCED
            for seq in range(2, 14):  # only the last five batches are remembered, as Kafka does
                await produce(broker, pid, 1, seq, 1)
            assert broker.check_sequence(pid, 1, "T", 0, 13, 1) == (DUPLICATE, 21)
            assert broker.check_sequence(pid, 1, "T", 0, 9, 1) == (DUPLICATE, 17)
            assert broker.check_sequence(pid, 1, "T", 0, 8, 1)[0] is OUT_OF_ORDER
        finally:
            await broker.stop()

    run(scenario())


def test_producers_silent_past_the_expiration_are_forgotten_unless_a_transaction_is_open(small_config):
    """producerIdExpirationMs (Kafka's producer.id.expiration.ms) goes by the newest record
    time of a producer's last batch; the time survives a restart through the snapshot."""
    day = 86_400_000
    now = int(time.time() * 1000)

    async def scenario():
        broker = await started(small_config)
        old, fresh, open_txn = [await broker.allocate_producer_id() for _ in range(3)]
        await produce(broker, old, 0, 0, 2, timestamp_ms=now - 2 * day)
        await produce(broker, fresh, 0, 0, 2, timestamp_ms=now - day // 2)
        await produce(broker, open_txn, 0, 0, 2, queue_id=1, timestamp_ms=now - 2 * day)
        await broker.stop()
        broker = Broker(small_config)
        await broker.start()
        try:
            states = broker.producer_states
            assert states.expire(now, day, lambda pid, topic, queue_id: pid == open_txn) == 1
            assert broker.check_sequence(old, 0, "T", 0, 9, 1)[0] is ACCEPT  # a new producer now
            assert broker.check_sequence(fresh, 0, "T", 0, 0, 2) == (DUPLICATE, 2)
            assert broker.check_sequence(open_txn, 0, "T", 1, 0, 2) == (DUPLICATE, 0)
            assert states.expire(now + day, day, lambda *_: False) == 2
        finally:
            await broker.stop()

    run(scenario())


def test_a_topic_deleted_after_the_snapshot_keeps_no_state_across_a_restart(small_config):
    """The snapshot (what a SIGKILL right after the delete leaves) and the log still hold
    the deleted topic's batches: the rebuilt table must not."""
    snapshot = os.path.join(small_config.store_path_root_dir, "config", "producerState.json")

    async def scenario():
        broker = await started(small_config)
        pid = await broker.allocate_producer_id()
        await produce(broker, pid, 0, 0, 3)
        await broker.producer_states.save()
        shutil.copy(snapshot, snapshot + ".old")
        broker.delete_topic("T")
        await broker.stop()
        os.replace(snapshot + ".old", snapshot)
        broker = Broker(small_config)
        await broker.start()
        try:
            assert not [key for key in broker.producer_states.entries if key[1] == "T"]
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            assert broker.check_sequence(pid, 0, "T", 0, 0, 3)[0] is ACCEPT  # not a duplicate
        finally:
            await broker.stop()

    run(scenario())


def test_state_comes_back_from_an_old_snapshot_and_the_log_after_it(small_config):
    """A snapshot taken early, then more batches (over several CommitLog segments), then a
    restart with that snapshot (what a SIGKILL leaves): the batches after it are derived
    from the log, so a retry of the last one is a duplicate and the next one is accepted."""
    snapshot = os.path.join(small_config.store_path_root_dir, "config", "producerState.json")

    async def scenario():
        broker = await started(small_config)
        pid = await broker.allocate_producer_id()
        other = await broker.allocate_producer_id()
        await produce(broker, pid, 0, 0, 10)
        await broker.producer_states.save()
        shutil.copy(snapshot, snapshot + ".old")
        seq = 10
        for _ in range(400):  # ~100 KiB: past the 64 KiB segment
            await produce(broker, pid, 0, seq, 2)
            seq += 2
        await produce(broker, other, 0, 0, 1, queue_id=1)
        last = broker.max_offset("T", 0) - 2
        await broker.stop()
        os.replace(snapshot + ".old", snapshot)
        os.remove(snapshot + ".bak")

        broker = Broker(small_config)
        await broker.start()
        try:
            assert broker.check_sequence(pid, 0, "T", 0, seq - 2, 2) == (DUPLICATE, last)
            assert broker.check_sequence(other, 0, "T", 1, 0, 1) == (DUPLICATE, 0)
            assert broker.check_sequence(pid, 0, "T", 0, seq + 1, 1)[0] is OUT_OF_ORDER
            assert await produce(broker, pid, 0, seq, 1) == last + 2
            assert await broker.allocate_producer_id() > other
        finally:
            await broker.stop()

    run(scenario())


@pytest.mark.parametrize("lie", [False, True], ids=["no-snapshot", "snapshot-past-the-log"])
def test_state_comes_back_from_the_log_alone(small_config, lie):
    """No snapshot (or one claiming more than the log holds, as after a power loss): the
    whole log is scanned, and new producer ids go past every id in it."""
    snapshot = os.path.join(small_config.store_path_root_dir, "config", "producerState.json")

    async def scenario():
        broker = await started(small_config)
        await produce(broker, 4242, 3, 0, 4)  # an id this broker never handed out (another's log)
        await produce(broker, 4242, 3, 4, 4)
        await broker.stop()
        if lie:
            with open(snapshot, "w") as f:
                f.write('{"offset": %d, "nextProducerId": 1000, "producers": [[4242, "T", 0, 3, [[0, 99, 0]]]]}'
                        % (1 << 40))
        else:
            os.remove(snapshot)
        with contextlib.suppress(FileNotFoundError):
            os.remove(snapshot + ".bak")
        broker = Broker(small_config)
        await broker.start()
        try:
            assert broker.check_sequence(4242, 3, "T", 0, 4, 4) == (DUPLICATE, 4)
            assert broker.check_sequence(4242, 3, "T", 0, 8, 1)[0] is ACCEPT
            assert broker.check_sequence(4242, 2, "T", 0, 0, 1)[0] is FENCED
            assert await broker.allocate_producer_id() > 4242
        finally:
            await broker.stop()

    run(scenario())


def test_producer_ids_are_never_handed_out_twice(small_config):
    """Ids handed out but never used to write are in no batch: the saved block keeps them."""
    async def scenario():
        broker = await started(small_config)
        first = [await broker.allocate_producer_id() for _ in range(3)]
        await broker.stop()
        broker = Broker(small_config)
        await broker.start()
        try:
            assert await broker.allocate_producer_id() > max(first)
        finally:
            await broker.stop()

    run(scenario())
