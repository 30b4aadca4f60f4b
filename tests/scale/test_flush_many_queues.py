"""The ConsumeQueue flush with many queues: more dirty files than SYNCFS_ABOVE are synced
with one syncfs, and a checkpoint whose state did not move is not written again (each one
names every queue), while the store still recovers every queue after a crash."""

from __future__ import annotations

import asyncio
import dataclasses
import os

from rocketport.common.message import Message
from rocketport.core.store import message_store

from tests.core.store.helpers import crash, drain, open_store, run

QUEUES = message_store.SYNCFS_ABOVE + 44


def test_many_dirty_queues_flush_in_one_syncfs_and_recover(small_config):
    config = dataclasses.replace(small_config, flush_interval_consume_queue=60_000)  # by hand here

    async def main():
        async with open_store(config) as store:
            checkpoint = store.checkpoint_file.path
            for q in range(QUEUES):
                await store.put_message(Message(f"Many{q % 50}", b"m%d" % q, queue_id=q // 50))
            await store.flush_queues_and_checkpoint()
            await asyncio.sleep(0.2)  # the CommitLog's own flush (20 ms here) has caught up
            await store.flush_queues_and_checkpoint()
            written = os.stat(checkpoint).st_mtime_ns
            assert all(mf.flushed_position == mf.wrote_position
                       for cq in store.consume_queues.values() for mf in cq.queue.files)
            for _ in range(3):  # read, nothing written: the same checkpoint is not rewritten
                assert drain(store, "Many0", 0) == [(0, b"m0")]
                await store.flush_queues_and_checkpoint()
            assert os.stat(checkpoint).st_mtime_ns == written
            await store.put_message(Message("Many0", b"again", queue_id=0))
            await asyncio.sleep(0.2)
            await store.flush_queues_and_checkpoint()
            assert os.stat(checkpoint).st_mtime_ns != written
            await crash(store)
        async with open_store(config) as store:
            for q in range(QUEUES):
                topic, queue_id = f"Many{q % 50}", q // 50
                expected = [(0, b"m%d" % q)] + ([(1, b"again")] if q == 0 else [])
                assert drain(store, topic, queue_id) == expected

    run(main())


def test_the_flush_syncs_the_queues_written_since_the_last_one(small_config):
    """The flush takes the queues written since it last ran (not a pass over every queue):
    what was written is flushed, a queue whose topic was deleted after its put is skipped,
    and what is written while a flush runs is flushed by the next."""
    config = dataclasses.replace(small_config, flush_interval_consume_queue=60_000)  # by hand here

    async def main():
        async with open_store(config) as store:
            for q in range(20):
                await store.put_message(Message(f"Written{q}", b"w", queue_id=0))
            store.delete_topic("Written3")
            await asyncio.sleep(0.2)
            await store.flush_queues_and_checkpoint()
            files = [mf for cq in store.consume_queues.values() for mf in cq.queue.files]
            assert len(files) == 19 and all(mf.flushed_position == mf.wrote_position for mf in files)
            flushing = asyncio.ensure_future(store.flush_queues_and_checkpoint())
            await store.put_message(Message("Written5", b"during", queue_id=0))
            await flushing
            await asyncio.sleep(0.2)
            await store.flush_queues_and_checkpoint()
            assert all(mf.flushed_position == mf.wrote_position
                       for cq in store.consume_queues.values() for mf in cq.queue.files)
            await crash(store)
        async with open_store(config) as store:
            assert drain(store, "Written5", 0) == [(0, b"w"), (1, b"during")]
            assert "Written3" not in {topic for topic, _ in store.consume_queues}

    run(main())
