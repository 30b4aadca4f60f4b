"""Recovery after crashes, torn tails and damaged files: consistent, nothing bad served."""

import os
import shutil

from rocketport.common.message import Message
from rocketport.core.store.checkpoint import Checkpoint
from rocketport.core.store.message_store import MessageStore

from .helpers import crash, drain, open_store, run


async def _fill(config, n, queues=2, size=100):
    async with open_store(config) as store:
        for i in range(n):
            await store.put_message(Message("T", i.to_bytes(4, "big") * (size // 4), queue_id=i % queues))
        return store.commitlog.max_offset


def _all(store, queues=2):
    return {q: drain(store, "T", q) for q in range(queues)}


def _assert_valid(items, queue, queues=2):
    # dense offsets, and every body is the one written for that offset
    assert [o for o, _ in items] == list(range(len(items)))
    for o, body in items:
        i = o * queues + queue
        assert body == i.to_bytes(4, "big") * 25


def _has_data(path):
    with open(path, "rb") as f:
        return any(f.read())


def _overwrite_before_end(config, end, back, data):
    """Write ``data`` ``back`` bytes before the log's end (a torn or garbled tail); returns
    the bytes it replaced."""
    seg = _segment_holding(config, end)
    with open(seg, "r+b") as f:
        f.seek(end - int(os.path.basename(seg)) - back)
        old = f.read(len(data))
        f.seek(end - int(os.path.basename(seg)) - back)
        f.write(data)
    return old


def _segment_holding(config, end):
    """The segment the log's last byte (just before ``end``) is in; a segment made ahead
    of the writer may follow it."""
    d = config.commit_log_dir
    return os.path.join(d, max(n for n in os.listdir(d) if int(n) < end))


def test_crash_without_clean_shutdown_keeps_everything(small_config):
    async def main():
        store = MessageStore(small_config)
        store.open()
        await store.start()
        for i in range(300):
            await store.put_message(Message("T", i.to_bytes(4, "big") * 25, queue_id=i % 2))
        await crash(store)
        async with open_store(small_config) as store:
            assert store.recovered_from_crash
            got = _all(store)
            assert len(got[0]) + len(got[1]) == 300
            for q in (0, 1):
                _assert_valid(got[q], q)
    run(main())


def test_torn_tail_is_truncated(small_config):
    async def main():
        end = await _fill(small_config, 200)
        # tear the last record: cut its last 30 bytes (zero them as a torn write leaves them)
        _overwrite_before_end(small_config, end, 30, bytes(30))
        async with open_store(small_config) as store:
            got = _all(store)
            assert len(got[0]) + len(got[1]) == 199
            for q in (0, 1):
                _assert_valid(got[q], q)
            assert store.recovery_report["truncated"]
            # the log goes on from the truncation point with dense offsets
            r = await store.put_message(Message("T", (199).to_bytes(4, "big") * 25, queue_id=1))
            assert r.queue_offset == 99
            assert r.commit_log_offset < end
    run(main())


def test_garbled_last_bytes_never_served(small_config):
    async def main():
        end = await _fill(small_config, 120)
        _overwrite_before_end(small_config, end, 60, b"\xAB" * 20)  # inside the last body: CRC mismatch
        async with open_store(small_config) as store:
            got = _all(store)
            assert len(got[0]) + len(got[1]) == 119
            for q in (0, 1):
                _assert_valid(got[q], q)
    run(main())


def test_deleted_consume_queue_is_rebuilt(small_config):
    async def main():
        await _fill(small_config, 150)
        shutil.rmtree(os.path.join(small_config.store_path_root_dir, "consumequeue", "T", "1"))
        async with open_store(small_config) as store:
            assert "rebuilding" in store.recovery_report["reason"]
            got = _all(store)
            assert len(got[1]) == 75
            for q in (0, 1):
                _assert_valid(got[q], q)
    run(main())


def test_corrupt_checkpoint_triggers_full_recovery(small_config):
    async def main():
        await _fill(small_config, 80)
        path = os.path.join(small_config.store_path_root_dir, "checkpoint")
        with open(path, "r+b") as f:
            f.seek(10)
            f.write(b"\xff\xff")
        async with open_store(small_config) as store:
            assert store.recovery_report["reason"] == "no checkpoint"
            got = _all(store)
            assert len(got[0]) == 40 and len(got[1]) == 40
    run(main())


def test_truncated_consume_queue_tail_is_repaired(small_config):
    async def main():
        await _fill(small_config, 100, queues=1)
        cq_dir = os.path.join(small_config.store_path_root_dir, "consumequeue", "T", "0")
        # the last segment with entries (an empty one made ahead of the writer may follow)
        last = [p for p in (os.path.join(cq_dir, n) for n in sorted(os.listdir(cq_dir)))
                if _has_data(p)][-1]
        with open(last, "r+b") as f:  # garble the last written entry
            data = f.read()
            end = len(data.rstrip(b"\x00"))
            f.seek(end - 20)
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x09" + bytes(8))
        async with open_store(small_config) as store:
            items = drain(store, "T", 0)
            assert [o for o, _ in items] == list(range(100))
            assert all(b == o.to_bytes(4, "big") * 25 for o, b in items)
    run(main())


def test_checkpoint_codec_round_trip():
    cp = Checkpoint(10, 9, 8, 7, 6, {("A", 0): 5, ("B", 3): 100})
    assert Checkpoint.decode(cp.encode()) == cp
    assert Checkpoint.decode(cp.encode()[:-1]) is None


def test_torn_properties_of_a_stored_batch_do_not_stop_recovery(small_config):
    """Properties are outside the body CRC: a torn tail that zeroes only the end of a
    stored batch's properties (INNER_NUM "3\\x00") left a store that could not open."""
    from rocketport.common.batch import Record, build_batch

    async def main():
        store = MessageStore(small_config)
        store.open()
        await store.start()
        await store.put_message(Message("K", b"before", queue_id=0))
        batch = build_batch([Record(i, 0, None, b"v%d" % i) for i in range(3)], base_timestamp=1)
        r = await store.put_inner_batch("K", 0, batch, 3)
        end = store.commitlog.max_offset
        await crash(store)
        # the record ends "...INNER_NUM\x013\x02": keep the 3
        _overwrite_before_end(small_config, end, 1, b"\0")
        async with open_store(small_config) as store:
            # the batch's body checks: it stays, indexed by its own count of records
            assert store.max_offset("K", 0) == 4 and r.queue_offset == 1
            assert [o for o, _ in drain(store, "K", 0)] == [0, 1, 2, 3]
            assert drain(store, "K", 0)[0] == (0, b"before")
    run(main())


def test_a_long_recovery_logs_its_progress(small_config, monkeypatch, caplog):
    """Crash recovery says where it is as it goes (here at every record: the interval and
    the stride made 0 and 1), with offsets rising towards the log's end."""
    from rocketport.core.store import recovery

    async def main():
        store = MessageStore(small_config)
        store.open()
        await store.start()
        for i in range(50):
            await store.put_message(Message("T", i.to_bytes(4, "big") * 25, queue_id=i % 2))
        end = store.commitlog.max_offset
        await crash(store)
        monkeypatch.setattr(recovery, "PROGRESS_INTERVAL_S", 0.0)
        monkeypatch.setattr(recovery, "PROGRESS_EVERY", 1)
        caplog.set_level("INFO", logger=recovery.__name__)
        async with open_store(small_config) as store:
            assert store.recovered_from_crash
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("store recovery: ")]
        assert len(lines) == 50
        offsets = [int(line.split()[4].rstrip(",")) for line in lines]
        assert offsets == sorted(offsets) and offsets[0] == 0 and offsets[-1] < end
        assert all("MB/s (its files end at " in line for line in lines)
        assert [line.split(", ")[1] for line in lines] == [f"{n} records re-dispatched" for n in range(1, 51)]
    run(main())



def test_a_record_torn_in_its_topic_is_cut_not_dispatched(small_config):
    """A tear that zeroes a record's topic and (empty) properties leaves its lengths and body
    CRC whole: the NUL topic marks it torn (it used to stop the broker from starting, unable
    to make a ConsumeQueue file for it)."""
    async def main():
        end = await _fill(small_config, 50)
        # the last record: topic "T", no properties
        assert _overwrite_before_end(small_config, end, 3, bytes(3)) == b"T\0\0"
        async with open_store(small_config) as store:
            got = _all(store)
            assert len(got[0]) + len(got[1]) == 49
            for q in (0, 1):
                _assert_valid(got[q], q)
    run(main())
