"""A full disk (ENOSPC) refuses puts cleanly: a typed error before anything is written.

The file layer is made to fail the way a full disk does (posix_fallocate raising ENOSPC,
in the loop and in the segment preparer's thread alike) for a while, then space returns.
Every put path must then either store a message whole (record and queue entry) or refuse it
with DiskFull having written nothing; queue offsets stay dense, nothing refused is ever
read, and puts succeed again without a restart. A real full file system is in
tests/protocols/test_disk_full_frontends.py (tmpfs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.common.message import Message
from rocketport.core.errors import DiskFull, StoreUnavailable
from rocketport.core.store.message_store import MessageStore, PlainSend
from tests.support.disk import SimulatedFullDisk

from .helpers import crash, drain, open_store, run

Disk = SimulatedFullDisk


@pytest.fixture(params=["ASYNC_FLUSH", "SYNC_FLUSH"])
def config(request, small_config):
    return dataclasses.replace(small_config, flush_disk_type=request.param)


def _kafka_batch(values: list[bytes]) -> bytes:
    return build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_timestamp=1)


async def _put(store: MessageStore, how: str, topic: str, n: int, tag: bytes) -> int:
    """Put ``n`` messages (bodies tag+i) to queue 0 the way ``how`` says; returns how many
    the store took (all or none)."""
    bodies = [tag + b"%05d" % i for i in range(n)]
    if how == "single":
        for body in bodies:
            await store.put_message(Message(topic, body, queue_id=0))
    elif how == "batch":
        await store.put_messages([Message(topic, b, queue_id=0) for b in bodies])
    elif how == "message_batch":
        await store.put_message_batch(topic, 0, encode_batch([BatchMessage(b, {}) for b in bodies]),
                                      sys_flag=0, born_timestamp=1, born_host=("127.0.0.1", 1))
    elif how == "inner_batch":
        await store.put_inner_batch(topic, 0, _kafka_batch(bodies), n)
    elif how == "append_sends":
        sends = [PlainSend(topic, 0, b"", [b], ("127.0.0.1", 1), 0, born_timestamp=1) for b in bodies]
        results = store.append_sends(sends)
        assert all(type(r) is tuple for r in results), results
    return n


def _bodies(store: MessageStore, topic: str, how: str) -> list[bytes]:
    """Every body of queue 0 in order, checking offsets are dense from 0."""
    if how == "inner_batch":  # one record for the batch: the values are in it, counted by offsets
        res = store.get_messages(topic, 0, 0, 10_000)
        return [b"x"] * (res.next_begin_offset if res.message_count else 0)
    got = drain(store, topic, 0)
    assert [o for o, _ in got] == list(range(len(got))), "queue offsets are not dense"
    return [b for _, b in got]


HOWS = ["single", "batch", "message_batch", "inner_batch", "append_sends"]
# every put path under each flush mode it serves (append_sends: ASYNC_FLUSH only)
FLUSH_HOWS = [(flush, how) for flush in ("ASYNC_FLUSH", "SYNC_FLUSH") for how in HOWS
              if not (how == "append_sends" and flush == "SYNC_FLUSH")]


@pytest.mark.parametrize("config,how", FLUSH_HOWS, indirect=["config"])
def test_a_new_queue_on_a_full_disk_refuses_the_put_and_writes_nothing(config, monkeypatch, how):
    disk = Disk(monkeypatch)

    async def main():
        async with open_store(config) as store:
            await store.put_message(Message("Other", b"first", queue_id=0))
            log_end = store.commitlog.max_offset
            disk.full = True
            with pytest.raises(DiskFull, match="the disk is full.*No space left"):
                await _put(store, how, "New", 3, b"a")
            assert disk.refused
            assert store.commitlog.max_offset == log_end, "a refused put wrote to the CommitLog"
            assert store.max_offset("New", 0) == 0
            assert [b for _, b in drain(store, "Other", 0)] == [b"first"]  # reads still served
            disk.full = False  # space returns: the next put works, no restart
            await _put(store, how, "New", 3, b"b")
            assert len(_bodies(store, "New", how)) == 3
    run(main())


@pytest.mark.parametrize("config,how", FLUSH_HOWS, indirect=["config"])
def test_a_consume_queue_segment_the_disk_has_no_room_for_refuses_the_put(config, monkeypatch, how):
    """small_config's ConsumeQueue segments hold 64 entries: the put that needs the next one
    is refused whole while the disk is full; the queue continues densely afterwards."""
    disk = Disk(monkeypatch)

    async def main():
        async with open_store(config) as store:
            await _put(store, how, "T", 60, b"a")
            # the preparer made the next segment when the queue was half full; as if it
            # had failed for want of space too, it is not there
            await asyncio.wrap_future(store._preparer.barrier())
            cq = store.get_consume_queue("T", 0)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(cq.queue.path_of(cq.file_size))
            disk.full = True
            log_end = store.commitlog.max_offset
            if how != "single":  # one put of 8 entries: 60 + 8 > 64, refused whole
                with pytest.raises(DiskFull):
                    await _put(store, how, "T", 8, b"b")
                assert store.commitlog.max_offset == log_end
                assert store.max_offset("T", 0) == 60
            await _put(store, how, "T", 4, b"c")  # still fits the segment: taken
            log_end = store.commitlog.max_offset
            with pytest.raises(DiskFull):
                await _put(store, how, "T", 1, b"d")
            assert store.commitlog.max_offset == log_end
            assert len(_bodies(store, "T", how)) == 64
            disk.full = False
            await _put(store, how, "T", 8, b"e")
            bodies = _bodies(store, "T", how)
            assert len(bodies) == 72
            if how != "inner_batch":
                assert bodies == ([b"a%05d" % i for i in range(60)] + [b"c%05d" % i for i in range(4)]
                                  + [b"e%05d" % i for i in range(8)])
    run(main())


def test_a_commit_log_segment_the_disk_has_no_room_for_refuses_the_put(config, monkeypatch):
    disk = Disk(monkeypatch)
    body = b"x" * 3000

    async def main():
        async with open_store(config) as store:
            await store.put_message(Message("T", body + b"000", queue_id=0))
            taken = 1
            disk.full = True  # the next segment's preparation (at half full) fails as well
            for _ in range(100):  # until the 64 KiB segment is full
                try:
                    await store.put_message(Message("T", body + b"%03d" % taken, queue_id=0))
                except DiskFull:
                    break
                taken += 1
            else:
                pytest.fail("the full disk never refused a put")
            assert 1 < taken < 25 and len(store.commitlog.queue.files) == 1
            disk.full = False
            await store.put_message(Message("T", body + b"%03d" % taken, queue_id=0))
            assert len(store.commitlog.queue.files) == 2
            assert [b for _, b in drain(store, "T", 0)] == [body + b"%03d" % i for i in range(taken + 1)]
    run(main())


def test_the_store_recovers_everything_it_took_during_a_full_disk(config, monkeypatch):
    """A crash after a full-disk episode: recovery finds what was taken, dense, and none of
    what was refused."""
    disk = Disk(monkeypatch)

    async def main():
        store = MessageStore(config)
        store.open()
        await store.start()
        taken = []
        for i in range(200):
            disk.full = 50 <= i < 120
            try:
                await store.put_message(Message("T", b"m%04d" % i + b"y" * 500, queue_id=i % 2))
                taken.append(i)
            except DiskFull:
                pass
        assert len(taken) < 200
        await store.flush_service.flush()
        await crash(store)
        async with open_store(config) as store:
            got = sorted(int(b[1:5]) for q in (0, 1) for _, b in drain(store, "T", q))
            assert got == taken
    run(main())


def test_disk_full_is_store_unavailable():
    """Front-ends that map StoreUnavailable (KAFKA_STORAGE_ERROR, SERVICE_NOT_AVAILABLE)
    answer a full disk the same way."""
    assert issubclass(DiskFull, StoreUnavailable)
    assert str(DiskFull("x")) == "the disk is full: x"
