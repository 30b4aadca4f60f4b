"""Store throughput against this machine's ceilings, measured in the same run.

Prints one JSON object per measurement. Usage:
    python bench/store_bench.py [--quick] [--dir /path/on/the/disk/to/measure]
Cases: puts of 100 B and 1 KiB messages (single, batches of 100 and 1000 stored as inner
batches, and 100-message record batches), ASYNC_FLUSH and SYNC_FLUSH (64 concurrent
putters), sequential reads through the zero-copy path, and how fast the index catches up
on a backlog once puts stop; ceilings: sequential write with fdatasync and memcpy into a
mapped file.

``--only inner_pulls`` runs just the remoting pulls of a stored (inner) batch, in process:
the store's get plus the remoting pull body (records expanded, filtered and encoded), with
the number of batch decompressions they cost:
    pull_32_of_inner_batch1000_lz4   32-message pulls until a 1,000-record lz4 batch is read
    pull_tagA_of_inner_batch2000_alternating   one pull (max 1024) of tag A over a
                                     2,000-record lz4 batch whose records alternate A/B
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import shutil
import tempfile
import time

from rocketport.common.batch import build_batch
from rocketport.common.batch import record_batch as _record_batch
from rocketport.common.batch.compression import LZ4
from rocketport.common.batch.record_batch import Record
from rocketport.common.message import Message
from rocketport.common.tags import tags_code
from rocketport.core.config import BrokerConfig
from rocketport.core.filter import compile_filter
from rocketport.core.store.message_store import MessageStore
from rocketport.protocols.remoting.records import pull_body

FLOORS = {
    "put_single_100B_async": 100_000,
    "put_batch100_100B_async": 1_000_000,
    "put_batch1000_100B_async": 1_000_000,
    "put_single_100B_sync_64putters": 30_000,
    "read_records_100B": 2_000_000,
    "read_inner_batches_100B": 2_000_000,
}


def emit(case: str, value: float, unit: str, **extra) -> None:
    row = {"bench": "store", "case": case, "value": round(value, 1), "unit": unit}
    if case in FLOORS:
        row["floor"] = FLOORS[case]
    row.update(extra)
    print(json.dumps(row), flush=True)


def ceiling_fdatasync_write(directory: str, total: int) -> float:
    path = os.path.join(directory, "ceiling.bin")
    chunk = b"\x5a" * (1 << 20)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    t = time.perf_counter()
    for _ in range(total // len(chunk)):
        os.write(fd, chunk)
    os.fdatasync(fd)
    dt = time.perf_counter() - t
    os.close(fd)
    os.unlink(path)
    return total / dt / 1e6


def ceiling_mmap_memcpy(directory: str, total: int) -> float:
    path = os.path.join(directory, "ceiling.map")
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    os.ftruncate(fd, total)
    mm = mmap.mmap(fd, total)
    os.close(fd)
    view = memoryview(mm)
    chunk = b"\x5a" * (100 * 1024)
    t = time.perf_counter()
    for pos in range(0, total - len(chunk) + 1, len(chunk)):
        view[pos:pos + len(chunk)] = chunk
    dt = time.perf_counter() - t
    view.release()
    mm.close()
    os.unlink(path)
    return total / dt / 1e6


def _config(root: str, sync: bool) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH" if sync else "ASYNC_FLUSH",
                        mapped_file_size_commit_log=256 << 20, message_index_enable=False)


async def _with_store(root: str, sync: bool, fn):
    store = MessageStore(_config(root, sync))
    store.open()
    await store.start()
    try:
        return await fn(store)
    finally:
        await store.stop()


async def bench_single(store: MessageStore, topic: str, size: int, n: int, queues: int) -> float:
    body = b"x" * size
    props = {"TAGS": "TagA"}
    t = time.perf_counter()
    for i in range(n):
        await store.put_message(Message(topic, body, props, queue_id=i % queues))
    return n / (time.perf_counter() - t)


async def bench_inner_batch(store: MessageStore, size: int, per_batch: int, n: int) -> float:
    now = int(time.time() * 1000)
    batch = build_batch([Record(i, 0, None, b"x" * size, []) for i in range(per_batch)],
                        base_timestamp=now)
    rounds = max(1, n // per_batch)
    t = time.perf_counter()
    for i in range(rounds):
        await store.put_inner_batch("Batch", i & 7, batch, per_batch)
    return rounds * per_batch / (time.perf_counter() - t)


async def bench_record_batch(store: MessageStore, size: int, per_batch: int, n: int) -> float:
    msgs = [Message("Records", b"x" * size, {"TAGS": "TagA"}, queue_id=0) for _ in range(per_batch)]
    rounds = max(1, n // per_batch)
    t = time.perf_counter()
    for _ in range(rounds):
        await store.put_messages(msgs)
    return rounds * per_batch / (time.perf_counter() - t)


async def bench_sync_putters(store: MessageStore, size: int, putters: int, n: int) -> tuple[float, int]:
    body = b"x" * size
    per = n // putters

    async def putter(k: int) -> None:
        for _ in range(per):
            await store.put_message(Message("Sync", body, queue_id=k & 7))

    syncs = store.flush_service.sync_count
    t = time.perf_counter()
    await asyncio.gather(*(putter(k) for k in range(putters)))
    return per * putters / (time.perf_counter() - t), store.flush_service.sync_count - syncs


def bench_reads(store: MessageStore, topic: str, queues: int, max_count: int) -> tuple[float, int]:
    t = time.perf_counter()
    n = 0
    for q in range(queues):
        offset = 0
        while True:
            res = store.get_messages(topic, q, offset, max_count)
            if not res.message_count:
                break
            n += res.message_count
            offset = res.next_begin_offset
    return n / (time.perf_counter() - t), n


async def bench_index_catch_up(root: str, size: int, n: int) -> float:
    """Records indexed per second once puts stop: the builder's backlog after a burst of
    sends that each carry a unique key, as RocketMQ clients set one on every message."""
    store = MessageStore(_config(root, False).with_overrides(message_index_enable=True))
    store.open()
    await store.start()
    try:
        body = b"x" * size
        for i in range(n):
            result = await store.put_message(Message("Indexed", body, {"TAGS": "TagA", "UNIQ_KEY": f"{i:032X}"},
                                                     queue_id=0))
        backlog = (store.dispatched_offset - store.index.built_offset) // result.wrote_bytes
        t = time.perf_counter()
        while store.index.built_offset < store.dispatched_offset:
            await asyncio.sleep(0.005)
        return backlog / (time.perf_counter() - t)
    finally:
        await store.stop()


class _CountingDecompress:
    """Counts batch decompressions: wraps the codec call that record batches are read
    through (record_batch.decompress), the same name before and after the expander."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = _record_batch.decompress

    def __enter__(self) -> "_CountingDecompress":
        def counting(*args, **kwargs):
            self.calls += 1
            return self._real(*args, **kwargs)
        _record_batch.decompress = counting
        return self

    def __exit__(self, *exc) -> None:
        _record_batch.decompress = self._real


def _inner_records(n: int, tags: tuple[str, ...]) -> list[Record]:
    return [Record(i, i, b"key-%d" % i, b"v" * 100, [("tag", tags[i % len(tags)].encode()), ("h", b"x")])
            for i in range(n)]


async def bench_inner_pulls(root: str, reps: int) -> None:
    """Remoting pulls of stored Kafka batches (lz4), in process: get_messages + pull_body.
    Each repetition reads a batch of its own (its own queue), so every one starts cold."""
    store = MessageStore(_config(root, False))
    store.open()
    await store.start()
    try:
        now = int(time.time() * 1000)
        # 32-message pulls until a 1,000-record batch is read
        batch = build_batch(_inner_records(1000, ("A",)), base_timestamp=now, compression=LZ4)
        for q in range(reps):
            await store.put_inner_batch("InnerPull", q, batch, 1000, tags_codes=tags_code("A"))
        pulls = messages = 0
        with _CountingDecompress() as counter:
            t = time.perf_counter()
            for q in range(reps):
                offset = 0
                while offset < 1000:
                    res = store.get_messages("InnerPull", q, offset, 32)
                    body = pull_body(res)
                    messages += res.message_count
                    offset = res.next_begin_offset
                    pulls += 1
            dt = time.perf_counter() - t
        assert messages == 1000 * reps and body
        emit("pull_32_of_inner_batch1000_lz4", dt / pulls * 1e6, "us/pull",
             pulls_per_s=round(pulls / dt), pulls_per_batch=pulls // reps,
             decompressions_per_batch=counter.calls / reps, batches=reps,
             note="100 B values, key, tag and one more header; get_messages + remoting pull_body")
        # one filtered pull of tag A over 2,000 records alternating A/B
        tags = ("A", "B")
        batch = build_batch(_inner_records(2000, tags), base_timestamp=now, compression=LZ4)
        codes = [tags_code(tags[i % 2]) for i in range(2000)]
        flt = compile_filter("TAG", "A")
        alt_reps = max(1, reps // 5)
        for q in range(alt_reps):
            await store.put_inner_batch("InnerAlt", q, batch, 2000, tags_codes=codes)
        segments = got = 0
        with _CountingDecompress() as counter:
            t = time.perf_counter()
            for q in range(alt_reps):
                res = store.get_messages("InnerAlt", q, 0, 1024, message_filter=flt)
                body = pull_body(res, flt)
                segments += len(res.segments)
                got += res.message_count
            dt = time.perf_counter() - t
        assert got == 1000 * alt_reps, got
        emit("pull_tagA_of_inner_batch2000_alternating", dt / alt_reps * 1e6, "us/pull",
             messages_per_pull=got // alt_reps, segments_per_pull=segments // alt_reps,
             decompressions_per_pull=counter.calls / alt_reps, pulls=alt_reps,
             note="one pull (max 1024) with TAG filter A; records alternate tags A and B")
    finally:
        await store.stop()


async def run(directory: str, quick: bool, only: str | None = None) -> None:
    if only == "inner_pulls":
        root = tempfile.mkdtemp(dir=directory)
        await bench_inner_pulls(root, 2 if quick else 10)
        shutil.rmtree(root, ignore_errors=True)
        return
    scale = 0.2 if quick else 1.0
    emit("ceiling_seq_write_fdatasync", ceiling_fdatasync_write(directory, int((512 << 20) * scale)), "MB/s")
    emit("ceiling_memcpy_into_mmap", ceiling_mmap_memcpy(directory, int((512 << 20) * scale)), "MB/s")
    for size, label in ((100, "100B"), (1024, "1KiB")):
        root = tempfile.mkdtemp(dir=directory)
        n_single = int(200_000 * scale)
        n_batch = int(2_000_000 * scale)

        async def async_cases(store: MessageStore) -> None:
            rate = await bench_single(store, "Single", size, n_single, 1)
            emit(f"put_single_{label}_async", rate, "msg/s", mb_s=round(rate * (size + 110) / 1e6, 1))
            await bench_single(store, "Mixed", size, n_single // 4, 8)
            for per in (100, 1000):
                rate = await bench_inner_batch(store, size, per, n_batch)
                emit(f"put_batch{per}_{label}_async", rate, "msg/s", mb_s=round(rate * size / 1e6, 1))
            rate = await bench_record_batch(store, size, 100, n_single)
            emit(f"put_recordbatch100_{label}_async", rate, "msg/s",
                 note="100 messages as contiguous CommitLog records (remoting batch path)")
            rate, n = bench_reads(store, "Single", 1, 1000)
            emit(f"read_records_{label}", rate, "msg/s", messages=n,
                 note="one queue read sequentially: contiguous records, zero-copy slices")
            rate, n = bench_reads(store, "Mixed", 8, 1000)
            emit(f"read_records_{label}_8queues_interleaved", rate, "msg/s", messages=n,
                 note="8 queues written round-robin: every message is its own slice")
            rate, n = bench_reads(store, "Batch", 8, 1000)
            emit(f"read_inner_batches_{label}", rate, "msg/s", messages=n)

        await _with_store(root, False, async_cases)
        shutil.rmtree(root, ignore_errors=True)

        root = tempfile.mkdtemp(dir=directory)

        async def sync_cases(store: MessageStore) -> None:
            rate, syncs = await bench_sync_putters(store, size, 64, int(60_000 * scale))
            emit(f"put_single_{label}_sync_64putters", rate, "msg/s", fdatasyncs=syncs)
            rate = await bench_inner_batch(store, size, 100, int(500_000 * scale))
            emit(f"put_batch100_{label}_sync", rate, "msg/s")

        await _with_store(root, True, sync_cases)
        shutil.rmtree(root, ignore_errors=True)

        root = tempfile.mkdtemp(dir=directory)
        emit(f"index_catch_up_idle_{label}", await bench_index_catch_up(root, size, int(100_000 * scale)),
             "records/s", note="UNIQ_KEY on every message; indexed after the puts stop")
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a fifth of the work")
    parser.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    parser.add_argument("--only", choices=("inner_pulls",), default=None,
                        help="run only these cases (inner_pulls: remoting pulls of stored batches)")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="rp-bench-")
    try:
        import uvloop
        uvloop.run(run(directory, args.quick, args.only))
    except ImportError:
        asyncio.run(run(directory, args.quick, args.only))
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
