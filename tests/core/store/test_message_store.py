import asyncio
import os
import pathlib

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.message import Message
from rocketport.core.errors import InvalidMessage, MessageTooLarge
from rocketport.core.store.get_result import GetStatus
from rocketport.core.store.message_store import PlainSend
from rocketport.core.store.record import decode_record

from .helpers import drain, open_store, run


def test_put_get_and_offsets(small_config):
    async def main():
        async with open_store(small_config) as store:
            for i in range(10):
                r = await store.put_message(Message("T", f"m{i}".encode(), {"TAGS": "a"}, queue_id=1))
                assert r.queue_offset == i
            assert store.max_offset("T", 1) == 10 and store.min_offset("T", 1) == 0
            res = store.get_messages("T", 1, 3, 4)
            assert res.status is GetStatus.FOUND and res.message_count == 4
            assert [m.body for m in res.messages()] == [b"m3", b"m4", b"m5", b"m6"]
            assert res.next_begin_offset == 7
            # contiguous records of one queue come back as one slice
            assert len(res.segments) == 1
            assert store.get_messages("T", 1, 10, 4).status is GetStatus.OFFSET_OVERFLOW_ONE
            assert store.get_messages("T", 1, 99, 4).status is GetStatus.OFFSET_OVERFLOW_BADLY
            assert store.get_messages("T", 2, 0, 4).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    run(main())


def test_segments_roll_over_with_blank_records(small_config):
    body = b"x" * 3000
    async def main():
        async with open_store(small_config) as store:
            for i in range(60):  # ~186 KB over 64 KiB segments
                await store.put_message(Message("T", body + bytes([i]), queue_id=0))
            assert len(store.commitlog.queue.files) >= 3
            got = drain(store, "T", 0)
            assert [o for o, _ in got] == list(range(60))
            assert all(b == body + bytes([i]) for i, (_, b) in enumerate(got))
    run(main())


def test_append_sends_roll_segments_over_and_halve_a_run_longer_than_one(small_config):
    """Sends that do not fit the segment's end are appended one by one after it rolls over
    (a BLANK record pads it); a single run longer than a whole segment is stored in halves.
    Every body comes back in order with dense offsets."""
    host = ("127.0.0.1", 1)
    body = b"y" * 3000

    async def main():
        async with open_store(small_config) as store:
            expected = []
            for read in range(20):  # ~60 KB of sends per call over 64 KiB segments
                sends = [PlainSend("R", 0, b"", [body + bytes([read, i])], host, 0) for i in range(20)]
                expected += [body + bytes([read, i]) for i in range(20)]
                assert all(type(r) is tuple for r in store.append_sends(sends))
            long_run = [b"z" * 1000 + bytes([i]) for i in range(100)]  # ~110 KB: over one segment
            (first, _), = store.append_sends([PlainSend("R", 0, b"", long_run, host, 0)])
            assert first == len(expected)
            expected += long_run
            assert len(store.commitlog.queue.files) >= 8
            got = drain(store, "R", 0)
            assert [o for o, _ in got] == list(range(len(expected)))
            assert [b for _, b in got] == expected
    run(main())


def test_record_batch_is_contiguous_and_per_message(small_config):
    async def main():
        async with open_store(small_config) as store:
            msgs = [Message("B", f"b{i}".encode(), {"KEYS": f"k{i}"}, queue_id=0) for i in range(20)]
            r = await store.put_messages(msgs)
            assert r.count == 20 and r.queue_offset == 0 and len(r.msg_ids) == 20
            res = store.get_messages("B", 0, 5, 100)
            assert [m.queue_offset for m in res.messages()] == list(range(5, 20))
            assert len(res.segments) == 1
            # each message is addressable by its own commit-log offset
            m7 = store.message_at(r.record_offsets[7])
            assert m7.body == b"b7" and m7.queue_offset == 7
    run(main())


def test_inner_batch_indexes_n_offsets(small_config):
    async def main():
        async with open_store(small_config) as store:
            await store.put_message(Message("K", b"single", queue_id=0))
            batch = bytes(8) + b"payload-of-5-records"
            r = await store.put_inner_batch("K", 0, batch, 5)
            assert r.queue_offset == 1 and r.count == 5
            await store.put_message(Message("K", b"after", queue_id=0))
            assert store.max_offset("K", 0) == 7
            res = store.get_messages("K", 0, 3, 100)
            kinds = [(s.is_inner_batch, s.first_offset, s.count) for s in res.segments]
            assert kinds == [(True, 3, 3), (False, 6, 1)]
            batch_seg = res.segments[0]
            stored = decode_record(batch_seg.view)
            assert batch_seg.batch_base == 1
            # the base offset inside the stored batch was rewritten to the first queue offset
            assert int.from_bytes(stored.body[:8], "big") == 1
            assert stored.body[8:] == b"payload-of-5-records"
    run(main())


def test_a_control_batch_goes_to_every_queue_in_one_write_as_an_inner_batch_would(small_config):
    """put_control_batch (a transaction's markers): one record per queue, each as
    put_inner_batch stores it (base offset rewritten, body CRC, INNER_NUM), contiguous in the
    log, each at its queue's next offset, their CRCs right; they survive a crash."""
    from rocketport.core.store.record import parse_record_info

    from .helpers import crash

    marker = build_batch([Record(0, 0, b"\0\0\0\1", b"\0\0\0\0\0\0")], base_timestamp=5_000,
                         producer_id=1 << 32, producer_epoch=3, transactional=True, control=True)
    queues = [("K", 0), ("K", 2), ("L", 1)]

    async def main():
        async with open_store(small_config) as store:
            for topic, queue_id in (("K", 0), ("K", 0), ("L", 1)):
                await store.put_message(Message(topic, b"data", queue_id=queue_id))
            alone = await store.put_inner_batch("K", 3, marker, 1, born_timestamp=5_000)
            assert await store.put_control_batch(queues, marker, 5_000) == [2, 0, 1]
            views = [store.get_messages(t, q, o, 1).segments[0].view for (t, q), o in zip(queues, [2, 0, 1])]
            for view in views:
                parse_record_info(view, 0, len(view), True)  # BadRecord on a wrong body CRC
            records = [decode_record(view) for view in views]
            expected = decode_record(store.get_messages("K", 3, 0, 1).segments[0].view)
            phys = alone.commit_log_offset + alone.wrote_bytes
            for (topic, queue_id), offset, record in zip(queues, [2, 0, 1], records):
                assert (record.topic, record.queue_id, record.queue_offset) == (topic, queue_id, offset)
                assert record.commit_log_offset == phys  # one after another
                assert int.from_bytes(record.body[:8], "big") == offset
                assert record.body[8:] == expected.body[8:] and record.properties == expected.properties
                assert (record.sys_flag, record.born_timestamp) == (expected.sys_flag, expected.born_timestamp)
                phys += record.store_size
            assert [store.max_offset(t, q) for t, q in queues] == [3, 1, 2]
            await crash(store)
        async with open_store(small_config) as store:
            assert [store.max_offset(t, q) for t, q in queues] == [3, 1, 2]
            assert store.get_messages("L", 1, 1, 1).segments[0].batch_base == 1
    run(main())


def test_max_message_size_and_bad_input(small_config):
    cfg = small_config.with_overrides(max_message_size=2048)
    async def main():
        async with open_store(cfg) as store:
            with pytest.raises(MessageTooLarge):
                await store.put_message(Message("T", b"x" * 2049, queue_id=0))
            with pytest.raises(InvalidMessage):
                await store.put_message(Message("T", b"x", {"P": "v" * 40000}, queue_id=0))
            with pytest.raises(InvalidMessage):
                await store.put_messages([Message("A", b"1", queue_id=0), Message("B", b"2", queue_id=0)])
            # nothing was written by the rejected puts
            assert store.max_offset("T", 0) == 0 and store.commitlog.max_offset == 0
    run(main())


def test_append_sends_spans_queues_in_one_write_and_refuses_only_the_bad_one(small_config):
    host = ("10.0.0.1", 1234)
    sends = [PlainSend(topic, queue, b"TAGS\x01t\x02", [b"%s-%d-%d" % (topic.encode(), queue, i)], host, 7,
                       born_timestamp=1)
             for i in range(5) for topic, queue in (("A", 0), ("A", 1), ("B", 0))]
    sends.insert(4, PlainSend("A", 0, b"", [b"x" * (small_config.max_message_size + 1)], host, 0))
    # a run refused as a whole: nothing of it is stored
    sends.insert(6, PlainSend("A", 1, b"", [b"ok", b"x" * (small_config.max_message_size + 1)], host, 0))

    async def main():
        async with open_store(small_config) as store:
            await store.put_message(Message("A", b"before", queue_id=0))
            out = store.append_sends(sends)
            assert isinstance(out[4], MessageTooLarge) and isinstance(out[6], MessageTooLarge)
            good = out[:4] + out[5:6] + out[7:]
            assert [o for o, _ in good] == [1 + i if (t, q) == ("A", 0) else i
                                            for i in range(5) for t, q in (("A", 0), ("A", 1), ("B", 0))]
            phys = [p for _, p in good]
            assert phys == sorted(phys)  # one contiguous write, in the given order
            for topic, queue in (("A", 0), ("A", 1), ("B", 0)):
                expected = [b"%s-%d-%d" % (topic.encode(), queue, i) for i in range(5)]
                got = [b for _, b in drain(store, topic, queue)]
                assert got[-5:] == expected
        async with open_store(small_config) as store:  # and they survive a restart
            assert [b for _, b in drain(store, "B", 0)] == [b"B-0-%d" % i for i in range(5)]
            assert store.get_messages("A", 0, 0, 10).message_count == 6
    run(main())


def test_offset_by_timestamp(small_config):
    async def main():
        async with open_store(small_config) as store:
            stamps = []
            for i in range(5):
                r = await store.put_message(Message("T", b"x", queue_id=0))
                stamps.append(r.store_timestamp)
                await asyncio.sleep(0.005)
            assert store.offset_by_timestamp("T", 0, 0) == 0
            assert store.offset_by_timestamp("T", 0, stamps[3]) <= 3
            assert store.offset_by_timestamp("T", 0, stamps[-1] + 10_000) == 5
    run(main())


def test_query_by_key_and_unique_id(small_config):
    async def main():
        async with open_store(small_config) as store:
            for i in range(30):
                await store.put_message(Message("T", f"v{i}".encode(),
                                                {"KEYS": f"order-{i % 10} extra", "UNIQ_KEY": f"U{i}"},
                                                queue_id=i % 2))
            found = store.query_by_key("T", "order-3")
            assert sorted(m.body for m in found) == [b"v13", b"v23", b"v3"]
            assert [m.body for m in store.query_by_key("T", "U17")] == [b"v17"]
            assert store.query_by_key("T", "missing") == []
            assert store.query_by_key("Other", "order-3") == []
    run(main())


def test_an_index_file_cut_short_by_a_crash_is_dropped_and_keys_are_found(small_config):
    """SIGKILL between creating an index file and sizing it leaves it empty: the next start
    drops it (it can hold nothing) and indexes on into a good file."""
    async def main():
        async with open_store(small_config) as store:
            await store.put_message(Message("T", b"before", {"KEYS": "k1"}, queue_id=0))
        index_dir = os.path.join(small_config.store_path_root_dir, "index")
        os.makedirs(index_dir, exist_ok=True)
        empty = os.path.join(index_dir, "99999999999999999")
        pathlib.Path(empty).touch()
        async with open_store(small_config) as store:
            assert not os.path.exists(empty)
            await store.put_message(Message("T", b"after", {"KEYS": "k2"}, queue_id=0))
            assert [m.body for m in store.query_by_key("T", "k1")] == [b"before"]
            assert [m.body for m in store.query_by_key("T", "k2")] == [b"after"]
    run(main())


def test_data_survives_clean_restart(small_config):
    async def main():
        async with open_store(small_config) as store:
            for i in range(50):
                await store.put_message(Message("T", f"{i}".encode(), queue_id=i % 3))
        async with open_store(small_config) as store:
            assert store.recovery_report["reason"] == "checkpoint"
            assert sum(store.max_offset("T", q) for q in range(3)) == 50
            r = await store.put_message(Message("T", b"new", queue_id=0))
            assert r.queue_offset == 17
    run(main())


def test_sync_flush_acknowledges_after_fdatasync(small_config):
    cfg = small_config.with_overrides(flush_disk_type="SYNC_FLUSH")
    async def main():
        async with open_store(cfg) as store:
            results = await asyncio.gather(*(store.put_message(Message("S", f"{i}".encode(), queue_id=0))
                                             for i in range(64)))
            assert sorted(r.queue_offset for r in results) == list(range(64))
            assert store.flush_service.flushed_offset >= max(r.commit_log_offset for r in results)
            # group commit: far fewer syncs than puts
            assert store.flush_service.sync_count < 64
            assert store.max_offset("S", 0) == 64
    run(main())

@pytest.mark.parametrize("after_flush", [False, True])
def test_sync_flush_dispatches_at_write_unless_dispatch_after_flush(small_config, after_flush):
    """SYNC_FLUSH answers a put after its fsync either way; a consumer sees the record once
    written (RocketMQ's reput), or with dispatchAfterFlush only once the fsync covers it."""
    cfg = small_config.with_overrides(flush_disk_type="SYNC_FLUSH", dispatch_after_flush=after_flush)
    async def main():
        async with open_store(cfg) as store:
            put = asyncio.ensure_future(store.put_message(Message("S", b"m", queue_id=0)))
            await asyncio.sleep(0)  # the put has appended and waits for its fsync
            assert not put.done() and store.flush_service.flushed_offset == 0
            assert store.max_offset("S", 0) == (0 if after_flush else 1)
            result = await put
            assert store.flush_service.flushed_offset >= result.commit_log_offset
            assert [m.body for m in store.get_messages("S", 0, 0, 8).messages()] == [b"m"]
    run(main())



def test_retention_deletes_old_segments_and_min_offset_follows(small_config):
    async def main():
        async with open_store(small_config) as store:
            for i in range(100):
                await store.put_message(Message("T", bytes([i]) * 2000, queue_id=0))
            files = list(store.commitlog.queue.files)
            assert len(files) >= 3
            old = os.path.getmtime(files[0].path) - 100 * 3600
            for f in files[:-1]:
                os.utime(f.path, (old, old))
            deleted = store.delete_expired_files(force=True)
            assert deleted == len(files) - 1
            assert store.commitlog.min_offset == files[-1].file_from_offset
            min_off = store.min_offset("T", 0)
            assert min_off > 0
            res = store.get_messages("T", 0, 0, 10)
            assert res.status is GetStatus.OFFSET_TOO_SMALL and res.next_begin_offset == min_off
            assert drain(store, "T", 0, min_off)[0][0] == min_off
    run(main())


def test_retention_waits_for_delete_when_hour(small_config):
    import time as _time
    cfg = small_config.with_overrides(delete_when="04", disk_max_used_space_ratio=100)
    async def main():
        async with open_store(cfg) as store:
            for i in range(100):
                await store.put_message(Message("T", bytes([i]) * 2000, queue_id=0))
            files = list(store.commitlog.queue.files)
            old = _time.time() - 100 * 3600
            for f in files[:-1]:
                os.utime(f.path, (old, old))
            today = _time.localtime()
            base = _time.mktime((today.tm_year, today.tm_mon, today.tm_mday, 0, 0, 0, 0, 0, -1))
            assert store.delete_expired_files(force=False, now=base + 10 * 3600) == 0
            assert store.delete_expired_files(force=False, now=base + 4 * 3600 + 60) == len(files) - 1
    run(main())


def test_inner_batch_records_are_indexed_by_key(small_config):
    from rocketport.common.batch import build_batch
    from rocketport.common.batch.record_batch import Record
    from rocketport.core.store.inner_batch import batch_messages

    async def main():
        async with open_store(small_config) as store:
            batch = build_batch([Record(0, 0, b"user-1", b"v0", [("tag", b"red")]),
                                 Record(1, 5, None, b"v1", [("bin", b"\xff\x00")]),
                                 Record(2, 9, b"user-2", b"v2", [])],
                                base_timestamp=1_000, compression=3)
            await store.put_message(Message("K", b"first", queue_id=0))
            r = await store.put_inner_batch("K", 0, batch, 3)
            found = store.query_by_key("K", "user-2")
            assert [(m.body, m.queue_offset) for m in found] == [(b"v2", 3)]
            res = store.get_messages("K", 0, 2, 10)
            msgs = list(batch_messages(res.segments[0].view, first_offset=2))
            assert [m.queue_offset for m in msgs] == [2, 3]
            assert msgs[0].properties["bin"].encode("utf-8", "surrogateescape") == b"\xff\x00"
            assert msgs[0].born_timestamp == 1_005 and msgs[0].commit_log_offset == r.commit_log_offset
            first = next(batch_messages(res.segments[0].view))
            assert first.tags == "red" and first.keys == ["user-1"]
    run(main())


def test_index_walks_plain_records_across_segments_in_slices(small_config):
    """The builder reads plain records in place: across segment ends (blank padding), in
    slices of any size, indexing KEYS (each key) and UNIQ_KEY, skipping records with
    neither, and with every key found at its record."""
    async def main():
        async with open_store(small_config) as store:
            store.index.stop()  # build by hand
            phys = {}
            for i in range(90):  # ~3,100 B each over 64 KiB segments: three segments
                props = {"TAGS": "t"} if i % 3 == 0 else (
                    {"KEYS": f"k{i} shared", "TAGS": "t"} if i % 3 == 1 else {"UNIQ_KEY": f"U{i}"})
                r = await store.put_message(Message("P", b"x" * 3000 + bytes([i]), props, queue_id=0))
                phys[i] = r.commit_log_offset
            assert len(store.commitlog.queue.files) >= 3
            walked = []
            while store.index.built_offset < store.dispatched_offset:
                walked.append(store.index.build(store, 7))
            assert sum(walked) == 90 and max(walked) == 7
            for i in range(90):
                key = None if i % 3 == 0 else f"k{i}" if i % 3 == 1 else f"U{i}"
                if key is not None:
                    assert store.index.lookup(f"P#{key}", 8, 0, 2**62) == [phys[i]]
            assert sorted(store.index.lookup("P#shared", 64, 0, 2**62)) == sorted(
                phys[i] for i in range(90) if i % 3 == 1)
    run(main())


def test_index_catches_up_on_a_quiet_store_in_slices_that_let_requests_in(small_config):
    """Once nothing is stored or read the builder runs slice after slice, yielding between
    them: a coroutine taking turns with it gets all its turns while the backlog is built."""
    config = small_config.with_overrides(mapped_file_size_commit_log=1 << 24)

    async def main():
        async with open_store(config) as store:
            for i in range(20_000):  # never suspends: the builder gets no turn, a backlog forms
                await store.put_message(Message("Q", b"v", {"UNIQ_KEY": f"U{i}"}, queue_id=0))
            assert store.index.built_offset < store.dispatched_offset
            turns = []
            for _ in range(30):
                turns.append(store.index.built_offset < store.dispatched_offset)
                await asyncio.sleep(0)
            assert all(turns), "the builder held the loop until the backlog was built"
            for _ in range(3000):  # bounded: far more than 20,000 records take
                if store.index.built_offset >= store.dispatched_offset:
                    break
                await asyncio.sleep(0.01)
            assert [m.body for m in store.query_by_key("Q", "U19999")] == [b"v"]
    run(main())


def test_index_slices_resume_inside_a_batch(small_config):
    from rocketport.common.batch import build_batch
    from rocketport.common.batch.record_batch import Record

    async def main():
        async with open_store(small_config) as store:
            store.index.stop()  # build by hand, in slices smaller than the batch
            batch = build_batch([Record(i, 0, b"k%d" % (i % 700) if i % 3 else None, b"v%d" % i)
                                 for i in range(1000)], base_timestamp=1_000, compression=1)
            r = await store.put_inner_batch("S", 0, batch, 1000)
            start = store.index.built_offset
            walked = []
            while store.index.built_offset < store.dispatched_offset:
                walked.append(store.index.build(store, 300))
                assert store.index.built_offset in (start, store.dispatched_offset)
            assert walked == [300, 300, 300, 100]
            for key in ("k1", "k698"):
                assert set(store.index.lookup(f"S#{key}", 8, 0, 2**62)) == {r.commit_log_offset}
            assert [m.body for m in store.query_by_key("S", "k5")] == [b"v5"]
    run(main())


def test_full_disk_refuses_the_put_and_keeps_the_store(small_config, monkeypatch):
    import errno

    from rocketport.core.errors import StoreUnavailable

    async def main():
        async with open_store(small_config) as store:
            await store.put_message(Message("T", b"a" * 100, queue_id=0))
            real = os.posix_fallocate

            def no_space(fd, offset, length):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(os, "posix_fallocate", no_space)
            with pytest.raises(StoreUnavailable, match="No space left"):
                for _ in range(100):  # until the segment is full
                    await store.put_message(Message("T", b"b" * 3000, queue_id=0))
            monkeypatch.setattr(os, "posix_fallocate", real)
            written = store.max_offset("T", 0)
            r = await store.put_message(Message("T", b"c" * 3000, queue_id=0))
            assert r.queue_offset == written
            assert [b[:1] for _, b in drain(store, "T", 0)][-1] == b"c"
    run(main())


def test_max_bytes_limits_a_get_but_first_message_always_fits(small_config):
    async def main():
        async with open_store(small_config) as store:
            r = await store.put_messages([Message("M", b"x" * 500, queue_id=0) for _ in range(10)])
            size = r.wrote_bytes // 10
            res = store.get_messages("M", 0, 0, 100, max_bytes=size * 3 + 10)
            assert res.message_count == 3 and res.next_begin_offset == 3
            res = store.get_messages("M", 0, 0, 100, max_bytes=1)
            assert res.message_count == 1
    run(main())


def test_unfiltered_gets_match_a_record_by_record_reading(small_config):
    """Back-to-back runs are read in one step (`_collect_run`); interleaved queues,
    segment ends, byte limits and inner batches fall back to the per-entry loop. Either
    way a get returns what reading the records one by one gives."""
    async def main():
        async with open_store(small_config) as store:
            for i in range(30):  # queue 0 back to back, then interleaved with queue 1
                await store.put_message(Message("R", b"a%d" % i + b"x" * (i * 40), queue_id=0))
            for i in range(30, 60):
                await store.put_message(Message("R", b"a%d" % i + b"x" * (i * 40), queue_id=0))
                await store.put_message(Message("R", b"b%d" % i, queue_id=1))
            await store.put_messages([Message("R", b"c%d" % i, queue_id=0) for i in range(5)])
            await store.put_inner_batch("R", 0, build_batch([Record(i, 0, None, b"k") for i in range(3)],
                                                            base_timestamp=1), 3)
            # one at a time: never the one-step read
            expected = [next(store.get_messages("R", 0, o, 1).messages()).body for o in range(68)]
            assert store.max_offset("R", 0) == 68 and len(store.commitlog.queue.files) > 1
            for start in (0, 7, 29, 30, 58):
                for max_count, max_bytes in ((32, None), (5, None), (32, 600), (32, 1)):
                    got = store.get_messages("R", 0, start, max_count, max_bytes=max_bytes)
                    bodies = [m.body for m in got.messages()]
                    assert bodies == expected[start:start + len(bodies)]
                    assert got.next_begin_offset == start + got.message_count
                    assert 1 <= got.message_count <= max_count
    run(main())


def test_index_steps_over_keyless_runs_and_indexes_what_follows(small_config):
    """Runs stored with `append_sends` (one send at a time) whose properties name no key are stepped over by the
    index walk as one range (the writer says so); keyed runs and records between them are
    indexed as ever, and the walk counts every record."""
    from rocketport.common.message import encode_properties

    async def main():
        async with open_store(small_config.with_overrides(mapped_file_size_commit_log=1 << 20)) as store:
            store.index.stop()  # build by hand
            plain = encode_properties({"TAGS": "a", "AMQP_DELIVERY_MODE": "2"})
            keyed = encode_properties({"TAGS": "a", "KEYS": "shared"})
            host = ("127.0.0.1", 5672)
            def append_run(bodies: list[bytes], props: bytes) -> int:
                (first, _), = store.append_sends([PlainSend("R", 0, props, bodies, host, 0)])
                return first

            for _ in range(3):  # contiguous keyless runs: one range
                append_run([b"p"] * 40, plain)
            single = await store.put_message(Message("R", b"k", {"KEYS": "one"}, queue_id=0))
            first = append_run([b"s%d" % i for i in range(30)], keyed)
            append_run([b"p"] * 40, plain)
            last = await store.put_message(Message("R", b"u", {"UNIQ_KEY": "U1"}, queue_id=0))
            # one call of several sends (a read of AMQP publishes): keyless ones are stepped
            # over together; one keyed send among them has the call's records walked
            store.append_sends([PlainSend("R", 0, plain, [b"p"] * 5, host, 0),
                                PlainSend("S", 1, plain, [b"q"] * 5, host, 0)])
            mixed = store.append_sends([PlainSend("R", 0, plain, [b"p"] * 5, host, 0),
                                        PlainSend("S", 0, encode_properties({"KEYS": "mid"}), [b"m"], host, 0),
                                        PlainSend("R", 0, plain, [b"p"] * 5, host, 0)])
            assert store.index.build(store) == 3 * 40 + 1 + 30 + 40 + 1 + 10 + 11
            assert store.index.lookup("R#one", 8, 0, 2**62) == [single.commit_log_offset]
            assert store.index.lookup("R#U1", 8, 0, 2**62) == [last.commit_log_offset]
            assert store.index.lookup("S#mid", 8, 0, 2**62) == [mixed[1][1]]
            shared = [m.queue_offset for m in store.query_by_key("R", "shared", max_num=64)]
            assert sorted(shared) == list(range(first, first + 30))
    run(main())


def test_batch_sends_are_indexed_in_bulk_by_the_walks_rules(small_config, tmp_path):
    """put_message_batch's records are indexed from the properties the writer sliced (a bulk
    put a batch) by the walk's per-record rules: each UNIQ_KEY and KEYS key at its record, a
    DEDUP_KEY shared by a batch once at its first record (and not again for the next batch
    continuing the run in the same segment), a batch naming two DEDUP_KEYs once per run.
    The same store walked in slices smaller than a batch (record by record) finds the same."""
    from rocketport.common.batch.message_batch import BatchMessage, encode_batch

    async def fill(store) -> dict[str, list[int]]:
        expected: dict[str, list[int]] = {}
        segment = store.commitlog.file_size

        async def put(n: int, props, names) -> None:
            body = encode_batch([BatchMessage(b"x" * 100, props(i)) for i in range(n)])
            r = await store.put_message_batch("B", 0, body, sys_flag=0, born_timestamp=0,
                                              born_host=("127.0.0.1", 1))
            for i, phys in enumerate(r.record_offsets):
                for name in names(i, phys):
                    expected.setdefault(name, []).append(phys)

        for n in range(4):  # ~60 KiB over 64 KiB segments: some batch opens one
            run_key = f"a{n % 2}"
            await put(40, lambda i: {"DEDUP_KEY": run_key, "UNIQ_KEY": f"A{n}-{i}"},
                      lambda i, phys: [f"A{n}-{i}"] + ([run_key] if i == 0 else []))
            await put(40, lambda i: {"UNIQ_KEY": f"C{n}-{i}", "DEDUP_KEY": run_key},  # the run goes on
                      lambda i, phys: [f"C{n}-{i}"] + ([run_key] if i == 0 and phys % segment == 0 else []))
            await put(30, lambda i: {"KEYS": f"k{n}-{i} shared", "UNIQ_KEY": f"K{n}-{i}"},
                      lambda i, phys: [f"k{n}-{i}", "shared", f"K{n}-{i}"])
            await put(20, lambda i: {"DEDUP_KEY": f"d{n}-{i // 10}"},
                      lambda i, phys: [f"d{n}-{i // 10}"] if i % 10 == 0 else [])
            await put(10, lambda i: {"TAGS": "plain"}, lambda i, phys: [])
        return expected

    async def main():
        found = []
        for name, step in (("bulk", None), ("walked", 7)):
            config = small_config.with_overrides(store_path_root_dir=str(tmp_path / name), max_index_num=4096)
            async with open_store(config) as store:
                store.index.stop()  # build by hand
                expected = await fill(store)
                if step is None:
                    assert store.index.build(store) == 4 * 140
                while store.index.built_offset < store.dispatched_offset:
                    store.index.build(store, step)
                found.append({key: sorted(store.index.lookup(f"B#{key}", 256, 0, 2**62)) for key in expected})
        assert found[0] == found[1] == {key: sorted(offsets) for key, offsets in expected.items()}
    run(main())
