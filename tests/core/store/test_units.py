"""Unit tests of the store's building blocks (through their public methods)."""

import os
import time

import numpy as np

from rocketport.core.store import formats
from rocketport.core.store.consume_queue import CQ_ENTRY, ConsumeQueue
from rocketport.core.store.index_file import IndexFile, key_hash, key_hashes
from rocketport.core.store.mapped_file_queue import MappedFileQueue


def test_mapped_file_queue_write_offset_truncates_and_deletes(tmp_path):
    q = MappedFileQueue(str(tmp_path / "log"), 4096)
    for _ in range(3):
        mf = q.last_for_write()
        mf.write(b"\x01" * 4096)
    assert [f.file_from_offset for f in q.files] == [0, 4096, 8192] and q.max_offset == 12288
    q.set_write_offset(5000)
    assert [f.file_from_offset for f in q.files] == [0, 4096] and q.max_offset == 5000
    assert not os.path.exists(tmp_path / "log" / "00000000000000008192")
    q.close()
    again = MappedFileQueue(str(tmp_path / "log"), 4096)
    again.load()
    assert [f.file_from_offset for f in again.files] == [0, 4096]
    again.close()


def test_consume_queue_spans_segments_and_reloads(tmp_path):
    cq = ConsumeQueue(str(tmp_path), "T", 0, 20 * 8)
    entries = b"".join(CQ_ENTRY.pack(1000 + i * 50, 50, i) for i in range(20))
    cq.put(0, entries[:200], 1500)
    cq.put(10, entries[200:], 2000)
    assert cq.max_offset == 20 and len(cq.queue.files) == 3
    assert cq.entry(13) == (1650, 50, 13)
    # entries() never crosses a segment
    assert len(cq.entries(6, 10)) == 2 * 20
    # independent decoder agrees with the struct path
    parsed = formats.ConsumeQueueEntry.parse(bytes(cq.entries(13, 1)))
    assert (parsed.commit_log_offset, parsed.size, parsed.tags_code) == (1650, 50, 13)
    cq.close()
    again = ConsumeQueue(str(tmp_path), "T", 0, 20 * 8)
    again.load()
    assert again.max_offset == 20 and again.max_physical_end == 2000
    again.truncate_to_physical(1400)  # entries whose record ends after 1400 go
    assert again.max_offset == 8
    again.correct_min_offset(1200)
    assert again.min_offset == 4
    again.close()


def test_index_file_lookup_chain_time_range_and_full(tmp_path):
    path = str(tmp_path / "20260101000000000")
    idx = IndexFile(path, 8, 10, create=True)
    now = int(time.time() * 1000)
    for i in range(9):
        assert idx.put(f"T#k{i % 3}", 100 * i, now + i * 1000)
    assert idx.is_full
    assert not idx.put("T#k0", 999, now)
    assert idx.lookup("T#k1", 10, now, now + 60_000) == [700, 400, 100]
    assert idx.lookup("T#k1", 2, now, now + 60_000) == [700, 400]
    assert idx.lookup("T#k1", 10, now + 5000, now + 60_000) == [700]
    # the count is on disk with every entry (a crash never leaves slots past it); the
    # other fields once the header is written (before a sync, at close)
    assert formats.IndexHeader.parse(bytes(idx.view[:40])).index_count == 10
    idx.write_header()
    header = formats.IndexHeader.parse(bytes(idx.view[:40]))
    assert header.index_count == 10 and header.end_phy_offset == 800
    idx.close()
    reopened = IndexFile(path, 8, 10, create=False)
    assert reopened.lookup("T#k2", 10, 0, now + 60_000) == [800, 500, 200]
    reopened.close()


def test_index_file_bulk_put_fills_to_the_end_and_chains_as_single_puts(tmp_path):
    now = int(time.time() * 1000)
    keys = [f"T#k{i % 3}" for i in range(14)]
    bulk = IndexFile(str(tmp_path / "20260101000000000"), 8, 10, create=True)
    entries = [(key_hash(k), 100 * i, now + i * 1000) for i, k in enumerate(keys)]
    assert bulk.put_many(entries[:4]) == 4
    assert bulk.put_many(entries, 4) == 9  # room for 9 entries (position 0 means none)
    assert bulk.is_full and bulk.put_many(entries, 9) == 9
    single = IndexFile(str(tmp_path / "20260101000000001"), 8, 10, create=True)
    for i, k in enumerate(keys[:9]):
        assert single.put(k, 100 * i, now + i * 1000)
    for k in ("T#k0", "T#k1", "T#k2"):
        assert bulk.lookup(k, 10, now, now + 60_000) == single.lookup(k, 10, now, now + 60_000) != []
    assert (bulk.index_count, bulk.hash_slot_count, bulk.end_phy_offset, bulk.end_timestamp) == \
        (single.index_count, single.hash_slot_count, single.end_phy_offset, single.end_timestamp)
    assert bytes(bulk.view[:bulk.entries_end]) == bytes(single.view[:single.entries_end])
    bulk.close()
    single.close()


def test_index_file_bulk_put_of_a_large_block_writes_what_single_puts_write(tmp_path):
    """Blocks of many entries (a Spark chunk's ids) are written with numpy: the same bytes,
    chains, slots and header fields as one put at a time, across repeated slots and a file
    that fills up mid-block."""
    now = int(time.time() * 1000)
    keys = [f"T#id{i}" if i % 5 else "T#same" for i in range(700)]
    entries = [(key_hash(k), 100 * i, now + i * 7) for i, k in enumerate(keys)]
    bulk = IndexFile(str(tmp_path / "20260101000000000"), 16, 600, create=True)
    assert bulk.put_many(entries[:3]) == 3
    assert bulk.put_many(entries, 3) == 599  # room for 599 entries (position 0 means none)
    single = IndexFile(str(tmp_path / "20260101000000001"), 16, 600, create=True)
    for i, k in enumerate(keys[:599]):
        assert single.put(k, 100 * i, now + i * 7)
    assert bytes(bulk.view[:bulk.entries_end]) == bytes(single.view[:single.entries_end])
    assert (bulk.index_count, bulk.hash_slot_count, bulk.end_phy_offset, bulk.end_timestamp) == \
        (single.index_count, single.hash_slot_count, single.end_phy_offset, single.end_timestamp)
    for k in ("T#same", "T#id1", "T#id598"):
        assert bulk.lookup(k, 200, now, now + 60_000) == single.lookup(k, 200, now, now + 60_000) != []
    bulk.close()
    single.close()


def test_key_hashes_of_equal_length_keys_are_their_key_hashes():
    ids = [b"%032X" % (0x7F0000016A3B00000000 + i) for i in range(700)]  # counted up from one head
    scattered = [os.urandom(32) for _ in range(50)]
    for keys in (ids, scattered, ids[:1], [ids[3]] * 5, [b"k%d" % i for i in range(10)]):
        assert key_hashes(b"Topic#", b"".join(keys), len(keys[0])).tolist() == [
            key_hash("Topic#" + k.decode("utf-8", "surrogateescape")) for k in keys]


def test_index_file_put_of_one_records_hashes_writes_what_single_puts_write(tmp_path):
    """A stored inner batch's ids (one commit-log offset and timestamp for all) put as one
    array: the same bytes and header fields as one put at a time, in blocks small (a loop)
    and large (numpy), across a repeated key and a file that fills up mid-block."""
    now = int(time.time() * 1000)
    keys = [f"T#id{i}" if i % 5 else "T#same" for i in range(700)]
    hashes = np.array([key_hash(k) for k in keys], np.int64)
    bulk = IndexFile(str(tmp_path / "20260101000000000"), 16, 600, create=True)
    single = IndexFile(str(tmp_path / "20260101000000001"), 16, 600, create=True)
    assert bulk.put_hashes(hashes[:10], 100, now) == 10
    assert bulk.put_hashes(hashes, 200, now + 5000, 10) == 599  # room for 599 entries
    assert bulk.is_full and bulk.put_hashes(hashes, 300, now, 599) == 599
    for i, k in enumerate(keys[:599]):
        assert single.put(k, 100 if i < 10 else 200, now if i < 10 else now + 5000)
    assert bytes(bulk.view[:bulk.entries_end]) == bytes(single.view[:single.entries_end])
    assert (bulk.index_count, bulk.hash_slot_count, bulk.end_phy_offset, bulk.end_timestamp) == \
        (single.index_count, single.hash_slot_count, single.end_phy_offset, single.end_timestamp)
    assert bulk.lookup("T#id17", 10, now, now + 60_000) == [200]
    bulk.close()
    single.close()
    # many slots: a block whose keys all fall in slots of their own, some already named
    ids = [f"T#{i:032X}" for i in range(300)]
    wide = [IndexFile(str(tmp_path / f"2026010100000001{n}"), 1 << 20, 1000, create=True) for n in range(2)]
    for f in wide:
        for i in range(0, 300, 50):
            assert f.put(ids[i], 50, now)
    assert len({key_hash(k) % (1 << 20) for k in ids}) == len(ids)
    assert wide[0].put_hashes(np.array([key_hash(k) for k in ids], np.int64), 300, now + 2000) == len(ids)
    for k in ids:
        assert wide[1].put(k, 300, now + 2000)
    assert bytes(wide[0].view[:wide[0].entries_end]) == bytes(wide[1].view[:wide[1].entries_end])
    assert wide[0].hash_slot_count == wide[1].hash_slot_count
    assert wide[0].lookup(ids[50], 10, now, now + 60_000) == [300, 50]
    for f in wide:
        f.close()


def test_code_hits_finds_aligned_tags_codes_only():
    from rocketport.core.store.reader import _code_hits

    a, b = 0x41, -5  # b's bytes and a's also occur inside offsets and sizes (misaligned)
    entries = [(0x41_0000_0041, 0x41, 7), (1, 2, a), (0xFFFF_FFFB, -5, 3), (4, 5, b),
               (6, 7, (1 << 32) + a), (8, 9, 0x41_0000_0000)]
    chunk = memoryview(b"".join(CQ_ENTRY.pack(*e) for e in entries))
    def hits(codes: frozenset[int]) -> list[tuple[int, int, int]]:
        at, picked = _code_hits(chunk, codes)
        return list(zip(at.tolist(), picked["phys"].tolist(), picked["size"].tolist()))
    # the low word, as Java's intValue(), with each hit's CommitLog offset and size
    assert hits(frozenset({a})) == [(1, 1, 2), (4, 6, 7)]
    assert [i for i, _, _ in hits(frozenset({a, b}))] == [1, 3, 4]
    assert hits(frozenset()) == []
