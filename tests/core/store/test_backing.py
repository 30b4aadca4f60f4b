"""Files are made at their full size but backed by disk blocks a window at a time.

A write into a mapped page that has no block is SIGBUS on a full disk, so nothing may be
written (or populated by the page warmer) at or past a file's backed end: writers extend it
first, a full disk then being DiskFull before anything is written. The segment preparer's
thread extends the file being written ahead of its writer, so puts rarely do it themselves.
Windows are shrunk here so that files have many of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time

import pytest

from rocketport.common.message import Message
from rocketport.core.errors import DiskFull
from rocketport.core.store import commitlog as commitlog_module
from rocketport.core.store import consume_queue as consume_queue_module
from rocketport.core.store import index_file as index_file_module
from rocketport.core.store.commitlog import CommitLog
from rocketport.core.store.mapped_file import PAGE, MappedFile
from rocketport.core.store.mapped_file_queue import MappedFileQueue
from rocketport.core.store.message_store import MessageStore
from rocketport.core.store.segment_preparer import SegmentPreparer
from tests.support.disk import REPO, SimulatedFullDisk, mounted_tmpfs

from .helpers import crash, drain, open_store, run
from .test_disk_full import FLUSH_HOWS, Disk, _bodies, _put
from .test_page_warmer import mapped_bytes

KiB, MiB = 1 << 10, 1 << 20


def blocks(path: str) -> int:
    """Bytes of disk blocks the file holds (what du counts)."""
    return os.stat(path).st_blocks * 512


Fallocations = SimulatedFullDisk


# ------------------------------------------------------------------ MappedFile
def test_a_new_file_has_its_full_size_and_only_its_window_backed(tmp_path):
    path = str(tmp_path / "00000000000000000000")
    mf = MappedFile(path, 8 * MiB, create=True, window=1 * MiB)
    try:
        assert os.path.getsize(path) == 8 * MiB and len(mf.view) == 8 * MiB
        assert mf.backed == 1 * MiB
        assert 1 * MiB <= blocks(path) < 1 * MiB + 64 * KiB
    finally:
        mf.close()
    whole = str(tmp_path / "00000000000000008192")
    mf = MappedFile(whole, 2 * MiB, create=True)  # no window: the whole file, as before
    try:
        assert mf.backed == 2 * MiB and blocks(whole) >= 2 * MiB
    finally:
        mf.close()


def test_ensure_backed_is_a_comparison_inside_the_backed_range_and_a_window_beyond(tmp_path, monkeypatch):
    path = str(tmp_path / "00000000000000000000")
    mf = MappedFile(path, 8 * MiB, create=True, window=1 * MiB)
    fallocations = Fallocations(monkeypatch)
    try:
        mf.ensure_backed(1 * MiB)
        assert fallocations.calls == []
        mf.ensure_backed(1 * MiB + 1)
        assert [c[1:] for c in fallocations.calls] == [(1 * MiB, 1 * MiB + PAGE)]
        assert mf.backed == 2 * MiB + PAGE and blocks(path) >= mf.backed
        mf.ensure_backed(8 * MiB - 10)  # never past the file's end
        assert mf.backed == 8 * MiB
    finally:
        mf.close()


def test_a_full_disk_refuses_an_extension_and_its_last_room_is_used(tmp_path, monkeypatch):
    path = str(tmp_path / "00000000000000000000")
    mf = MappedFile(path, 8 * MiB, create=True, window=1 * MiB)
    fallocations = Fallocations(monkeypatch)
    try:
        fallocations.fail_above = 64 * KiB  # room for this write, not for a window beyond
        mf.ensure_backed(1 * MiB + 100)
        assert mf.backed == 1 * MiB + PAGE
        fallocations.full = True
        with pytest.raises(DiskFull, match="the disk is full: cannot extend .*No space left"):
            mf.ensure_backed(1 * MiB + PAGE + 1)
        assert mf.backed == 1 * MiB + PAGE  # unchanged
    finally:
        mf.close()


def test_a_file_mapped_from_disk_is_backed_up_to_its_write_position(tmp_path):
    q = MappedFileQueue(str(tmp_path / "log"), 1 * MiB, 64 * KiB)
    q.last_for_write().write(b"\x01" * (100 * KiB))
    q.close()
    again = MappedFileQueue(str(tmp_path / "log"), 1 * MiB, 64 * KiB)
    again.load()
    try:
        assert again.files[0].backed == 0  # unknown: nothing may be written yet
        again.set_write_offset(100 * KiB)  # recovery found the data end
        assert again.files[0].backed == 100 * KiB
    finally:
        again.close()


def test_zeroing_a_torn_tail_writes_only_the_pages_that_hold_bytes(tmp_path):
    """Recovery zeroes what lies past the valid end; the pages there that have no block
    must not be written (a full disk would make that SIGBUS)."""
    path = str(tmp_path / "00000000000000000000")
    mf = MappedFile(path, 4 * MiB, create=True, window=64 * KiB)
    mf.view[60 * KiB:70 * KiB] = b"\x07" * (10 * KiB)  # test-only: past the backed end
    mf.view[3 * MiB:3 * MiB + 100] = b"\x09" * 100  # an island of data after a hole
    before = blocks(path)
    mf.zero_from(61 * KiB)
    try:
        assert mf.view[60 * KiB:61 * KiB] == b"\x07" * KiB
        assert mf.view[61 * KiB:] == bytes(4 * MiB - 61 * KiB)
        assert blocks(path) <= before + 8 * KiB  # not the rest of the 1 MiB chunk
    finally:
        mf.close()


# ------------------------------------------------------------------ CommitLog
def test_the_commit_log_is_backed_ahead_by_the_preparer_thread_not_by_the_writer(tmp_path, monkeypatch):
    fallocations = Fallocations(monkeypatch)
    preparer = SegmentPreparer()
    cl = CommitLog(str(tmp_path), 16 * MiB, warm=False, preparer=preparer, window=1 * MiB)
    record = b"r" * 1000
    try:
        mf = cl.reserve(len(record))
        created = len(fallocations.calls)  # the first segment's window, made by the writer
        while mf.wrote_position < 6 * MiB:
            mf = cl.reserve(len(record))
            mf.write(record)
            if mf.wrote_position % (64 * KiB) < len(record):  # a writer slower than the thread
                preparer.barrier().result()
        writer = [c for c in fallocations.calls[created:] if c[0] != "segment-preparer_0"]
        assert writer == [], "the writer backed the segment itself"
        assert mf.wrote_position <= mf.backed <= mf.wrote_position + 2 * MiB
        assert blocks(mf.path) < 8 * MiB  # the rest of the 16 MiB stays unallocated
    finally:
        preparer.close()
        cl.close()


def test_without_the_thread_the_writer_backs_the_segment_itself(tmp_path):
    cl = CommitLog(str(tmp_path), 4 * MiB, warm=False, window=256 * KiB)
    try:
        for _ in range(3000):
            mf = cl.reserve(1000)
            mf.write(b"w" * 1000)
        assert cl.queue.files[0].backed >= cl.queue.files[0].wrote_position
        assert cl.max_offset == 3000 * 1000
    finally:
        cl.close()


def test_the_page_warmer_stays_inside_the_backed_range(tmp_path):
    cl = CommitLog(str(tmp_path), 64 * MiB, warm=True, window=1 * MiB)
    try:
        mf = cl.reserve(100)
        mf.write(b"\x01" * 100)
        time.sleep(0.3)
        assert cl.warmer.enabled
        assert mapped_bytes(mf.mm) <= mf.backed == 1 * MiB  # its lead is 8 MiB
    finally:
        cl.close()


# ------------------------------------------------------------------ the store
@pytest.fixture
def windowed(small_config, monkeypatch):
    """Segments many windows long: a 1 MiB CommitLog segment backed 64 KiB at a time,
    ConsumeQueue files of 4096 entries backed 4 KiB (204 entries) at a time, index files of
    20,000 entries backed 8 KiB (409 entries) at a time."""
    monkeypatch.setattr(commitlog_module, "BACKING_WINDOW", 64 * KiB)
    monkeypatch.setattr(consume_queue_module, "BACKING_WINDOW", 4 * KiB)
    monkeypatch.setattr(index_file_module, "ENTRY_WINDOW", 8 * KiB)
    return dataclasses.replace(small_config, mapped_file_size_commit_log=1 * MiB,
                               mapped_file_size_consume_queue=20 * 4096,
                               max_hash_slot_num=1024, max_index_num=20_000)


def test_a_store_writes_reads_finds_and_recovers_across_many_windows(windowed):
    async def main():
        store = MessageStore(windowed)
        store.open()
        await store.start()
        for i in range(2500):  # ~12 CommitLog windows, 12 ConsumeQueue windows, 6 index ones
            await store.put_message(Message("W", b"m%05d" % i + b"x" * 300, {"KEYS": "k%d" % i},
                                            queue_id=i % 2))
        for how in ("batch", "message_batch", "inner_batch", "append_sends"):
            await _put(store, how, "W" + how, 300, b"b")  # more entries than a window
        cl = store.commitlog.queue.last
        assert cl.backed < cl.file_size and blocks(cl.path) < cl.file_size
        assert [m.body[:6] for m in store.query_by_key("W", "k2222")] == [b"m02222"]
        await store.flush_service.flush()
        await crash(store)
        async with open_store(windowed) as store:  # backed from the write position on
            assert [m.body[:6] for m in store.query_by_key("W", "k1")] == [b"m00001"]
            for i in range(2500, 3000):
                await store.put_message(Message("W", b"m%05d" % i, {"KEYS": "k%d" % i}, queue_id=i % 2))
            assert [m.body for m in store.query_by_key("W", "k2999")] == [b"m02999"]
            odd = [b for _, b in drain(store, "W", 1)]
            assert [b[:6] for b in odd] == [b"m%05d" % i for i in range(1, 3000, 2)]
            for how in ("batch", "message_batch", "inner_batch", "append_sends"):
                assert len(_bodies(store, "W" + how, how)) == 300
    run(main())


@pytest.mark.parametrize("runs_out", ["commitlog", "consumequeue"])
@pytest.mark.parametrize("flush,how", FLUSH_HOWS)
def test_a_put_past_the_backed_window_on_a_full_disk_is_refused_whole(windowed, monkeypatch, how,
                                                                      runs_out, flush):
    """Not a new segment this time: the next window of the current CommitLog segment (large
    messages) or ConsumeQueue file (small ones) does not fit. The put that needs it is
    refused with nothing written, the ones before it are whole, and puts resume."""
    config = dataclasses.replace(windowed, flush_disk_type=flush)
    tag, per_put = (b"b" * 2000, 10) if runs_out == "commitlog" else (b"b", 50)
    if how == "single":
        per_put = 1  # one message per put: all or nothing
    disk = Disk(monkeypatch)

    async def main():
        async with open_store(config) as store:
            await _put(store, how, "T", 1, b"a")
            await asyncio.wrap_future(store._preparer.barrier())
            disk.full = True
            taken = 1
            for _ in range(1000):
                log_end = store.commitlog.max_offset
                try:
                    taken += await _put(store, how, "T", per_put, tag)
                except DiskFull:
                    assert store.commitlog.max_offset == log_end, "a refused put wrote"
                    break
            else:
                pytest.fail("the full disk never refused a put")
            segment = store.commitlog.queue.last
            cq = store.get_consume_queue("T", 0).queue.last
            assert len(store.commitlog.queue.files) == 1 and len(store.get_consume_queue("T", 0).queue.files) == 1
            if runs_out == "commitlog":  # refused inside the segment, at its window's end
                assert 32 * KiB < segment.wrote_position <= segment.backed == 64 * KiB
            else:
                assert 2 * KiB < cq.wrote_position <= cq.backed == 4 * KiB
            assert disk.refused
            assert len(_bodies(store, "T", how)) == taken
            disk.full = False
            taken += await _put(store, how, "T", per_put, tag)
            assert len(_bodies(store, "T", how)) == taken
    run(main())


# ------------------------------------------------------------------ a real full disk
_CHILD = """
import asyncio, os, sys
from rocketport.core.config import BrokerConfig
from rocketport.core.errors import DiskFull
from rocketport.common.message import Message
from rocketport.core.store import commitlog, consume_queue, index_file
from rocketport.core.store.message_store import MessageStore

commitlog.BACKING_WINDOW = 256 << 10
consume_queue.BACKING_WINDOW = 8 << 10
index_file.ENTRY_WINDOW = 4 << 10  # runs out first: 204 keys

sys.path.insert(0, sys.argv[2])  # the repository: tests.support
from tests.support.disk import fill_filesystem as fill

async def main(root):
    config = BrokerConfig(store_path_root_dir=os.path.join(root, "store"),
                          mapped_file_size_commit_log=4 << 20,  # 16 windows
                          mapped_file_size_consume_queue=20 * 8192,  # 20 windows
                          max_hash_slot_num=1024, max_index_num=50_000)  # 245 windows
    store = MessageStore(config)
    store.open()
    await store.start()
    for q in range(8):  # the queues' files exist before the disk fills
        await store.put_message(Message("T", b"x", {"KEYS": "first%d" % q}, queue_id=q))
    await asyncio.sleep(0.5)  # the first index file is made
    fill(root)
    taken = []
    refused = 0
    for i in range(20_000):  # past the windows backed before the disk filled
        try:
            await store.put_message(Message("T", b"y" * 200, {"KEYS": "k%d" % i}, queue_id=i % 8))
            taken.append(i)
        except DiskFull:
            refused += 1
        if i % 200 == 0:
            await asyncio.sleep(0.01)  # let the index builder and the flushes run
    assert taken and refused, (len(taken), refused)
    segment = store.commitlog.queue.last
    assert len(store.commitlog.queue.files) == 1 and segment.wrote_position < segment.file_size
    assert segment.backed < segment.file_size  # refused at a window's end, inside the segment
    await asyncio.sleep(2)  # the builder indexes what was taken until its window runs out
    assert store.index.disk_full is not None, "the index never ran out of room"
    assert store.index.built_offset < store.dispatched_offset
    assert store.commitlog.warmer.enabled  # it never tried to populate an unbacked page
    os.unlink(os.path.join(root, "filler"))  # space returns
    await store.put_message(Message("T", b"after", {"KEYS": "after"}, queue_id=0))
    for _ in range(100):
        if store.index.built_offset == store.dispatched_offset:
            break
        await asyncio.sleep(0.1)
    assert store.index.built_offset == store.dispatched_offset
    assert [m.body for m in store.query_by_key("T", "k%d" % taken[-1])] == [b"y" * 200]
    assert [m.body for m in store.query_by_key("T", "after")] == [b"after"]
    assert sum(store.max_offset("T", q) for q in range(8)) == len(taken) + 9
    await store.stop()
    print(len(taken), refused)

asyncio.run(main(sys.argv[1]))
"""


def test_a_really_full_disk_refuses_puts_and_pauses_the_index_without_sigbus(tmp_path):
    """On a 16 MiB tmpfs: the CommitLog, ConsumeQueue and index windows run out while the
    disk is full, inside their files; every writer gets DiskFull instead of SIGBUS."""
    with mounted_tmpfs(tmp_path / "disk", size="16m") as mount_point:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(mount_point), REPO],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode} (-7: SIGBUS): {done.stderr[-3000:]}"
