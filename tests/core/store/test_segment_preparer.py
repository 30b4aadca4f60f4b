"""A new topic's ConsumeQueue files are made off the event loop, never replacing a file,
and whatever a crash leaves of a preparation loads cleanly."""

import asyncio
import os
import pathlib
import random
import time

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.store.consume_queue import ConsumeQueue
from rocketport.core.store.mapped_file import segment_name
from rocketport.core.store.segment_preparer import SUFFIX, prepare_file

from .helpers import run


def wait_for(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_prepare_file_makes_a_full_size_file_and_never_replaces_one(tmp_path):
    path = str(tmp_path / "q" / "00000000000000000000")
    assert prepare_file(path, 1 << 20) is True
    assert os.path.getsize(path) == 1 << 20 and not os.path.exists(path + SUFFIX)
    with open(path, "r+b") as f:
        f.write(b"entries")
    assert prepare_file(path, 1 << 20) is False  # exists: left alone
    with open(path, "rb") as f:
        assert f.read(7) == b"entries"
    assert os.listdir(tmp_path / "q") == ["00000000000000000000"]


def _cq_dir(config, topic, queue_id):
    return os.path.join(config.store_path_root_dir, "consumequeue", topic, str(queue_id))


def test_creating_a_topic_prepares_each_queue_and_messages_land_in_the_prepared_files(small_config):
    first = "00000000000000000000"

    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("Fresh", read_queue_nums=3, write_queue_nums=3)
            ready = await asyncio.to_thread(wait_for, lambda: all(
                os.path.exists(os.path.join(_cq_dir(small_config, "Fresh", q), first)) for q in range(3)))
            assert ready
            for q in range(3):
                assert os.path.getsize(os.path.join(_cq_dir(small_config, "Fresh", q), first)) == 20 * 64
            for i in range(5):
                await broker.put_message(Message("Fresh", b"m%d" % i, queue_id=1))
            res = broker.get_messages("Fresh", 1, 0, 10)
            assert [m.body for m in res.messages()] == [b"m%d" % i for i in range(5)]
        # restart: the used queue keeps its messages, the prepared, unused ones load empty
        async with Broker(small_config) as broker:
            assert broker.max_offset("Fresh", 1) == 5 and broker.max_offset("Fresh", 0) == 0
            assert [m.body for m in broker.get_messages("Fresh", 1, 0, 10).messages()][-1] == b"m4"
            await broker.put_message(Message("Fresh", b"late", queue_id=0))
            assert broker.max_offset("Fresh", 0) == 1

    run(main())


def test_a_deleted_topic_is_not_recreated_by_a_late_preparation(small_config):
    async def main():
        async with Broker(small_config) as broker:
            for _ in range(20):  # the deletion races a preparation in flight now and then
                broker.create_topic("Gone", read_queue_nums=8, write_queue_nums=8)
                await asyncio.sleep(0.0005 * random.random())
                broker.delete_topic("Gone")
            # one worker, in order: once a topic created after it is prepared, so was "Gone"
            broker.create_topic("Marker", read_queue_nums=1, write_queue_nums=1)
            assert await asyncio.to_thread(wait_for, lambda: os.path.exists(
                os.path.join(_cq_dir(small_config, "Marker", 0), "00000000000000000000")))
            assert not os.path.exists(os.path.join(small_config.store_path_root_dir, "consumequeue", "Gone"))

    run(main())


def test_a_preparation_cut_short_by_a_crash_is_ignored_and_removed(small_config, tmp_path):
    directory = _cq_dir(small_config, "Cut", 0)
    os.makedirs(directory)
    stale = os.path.join(directory, "00000000000000000000" + SUFFIX)
    pathlib.Path(stale).touch()  # SIGKILL before the reservation: an empty temporary file
    cq = ConsumeQueue(os.path.dirname(os.path.dirname(directory)), "Cut", 0, 20 * 64)
    cq.load()
    assert cq.max_offset == 0 and not os.path.exists(stale)


def test_the_next_commitlog_segment_is_made_ahead_and_a_crash_with_it_recovers(small_config):
    from rocketport.core.store.message_store import MessageStore

    from .helpers import crash, open_store

    segment = small_config.mapped_file_size_commit_log
    directory = small_config.commit_log_dir
    body = b"x" * 1000

    async def main():
        store = MessageStore(small_config)
        store.open()
        await store.start()
        while store.commitlog.max_offset < segment * 0.6:  # past half of the first segment
            await store.put_message(Message("L", body, queue_id=0))
        ahead = os.path.join(directory, segment_name(segment))
        assert await asyncio.to_thread(wait_for, lambda: os.path.exists(ahead))
        assert len(store.commitlog.queue.files) == 1  # made on disk, not yet in use
        written = store.max_offset("L", 0)
        await crash(store)
        async with open_store(small_config) as store:  # the unused segment is dropped, no data lost
            assert store.max_offset("L", 0) == written
            while store.commitlog.max_offset < segment * 2.6:  # roll twice more
                await store.put_message(Message("L", body, queue_id=0))
            total = store.max_offset("L", 0)
            got = [m.body for m in store.get_messages("L", 0, 0, total).messages()]
            assert len(store.commitlog.queue.files) >= 3
        async with open_store(small_config) as store:
            assert store.max_offset("L", 0) == total
            offset, seen = 0, 0
            while offset < total:
                res = store.get_messages("L", 0, offset, 64)
                seen += sum(1 for m in res.messages() if m.body == body)
                offset = res.next_begin_offset
            assert seen == total and got

    run(main())


def test_a_consume_queue_s_next_segment_is_made_ahead_and_a_crash_with_it_recovers(small_config):
    from rocketport.core.store.message_store import MessageStore

    from .helpers import crash, open_store

    per_file = small_config.mapped_file_size_consume_queue // 20  # entries per segment

    async def main():
        store = MessageStore(small_config)
        store.open()
        await store.start()
        for i in range(per_file // 2 + 3):  # past half of the queue's first segment
            await store.put_message(Message("Q", b"m%d" % i, queue_id=0))
        ahead = os.path.join(_cq_dir(small_config, "Q", 0), segment_name(per_file * 20))
        assert await asyncio.to_thread(wait_for, lambda: os.path.exists(ahead))
        written = store.max_offset("Q", 0)
        await crash(store)
        async with open_store(small_config) as store:
            assert store.max_offset("Q", 0) == written
            for i in range(written, per_file * 2 + 5):  # into the third segment
                await store.put_message(Message("Q", b"m%d" % i, queue_id=0))
        async with open_store(small_config) as store:
            total = store.max_offset("Q", 0)
            assert total == per_file * 2 + 5
            bodies, offset = [], 0
            while offset < total:
                res = store.get_messages("Q", 0, offset, 16)
                bodies += [m.body for m in res.messages()]
                offset = res.next_begin_offset
            assert bodies == [b"m%d" % i for i in range(total)]

    run(main())


def test_a_segment_cut_short_before_its_reservation_is_dropped(small_config):
    directory = _cq_dir(small_config, "Cut", 0)
    os.makedirs(directory)
    pathlib.Path(directory, segment_name(0)).touch()  # SIGKILL between O_CREAT and fallocate
    cq = ConsumeQueue(os.path.dirname(os.path.dirname(directory)), "Cut", 0, 20 * 64)
    cq.load()
    assert cq.max_offset == 0 and os.listdir(directory) == []
