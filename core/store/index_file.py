"""IndexFile: find messages by key or unique id within a time range (RocketMQ's layout).

    header (40 B): beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 |
                   endPhyOffset i64 | hashSlotCount i32 | indexCount i32
    slots:   hashSlotNum x i32   (position of the newest entry of the slot's chain; 0 = empty)
    entries: indexNum x (keyHash i32 | phyOffset i64 | timeDiff i32 (s) | prevIndex i32)

One difference from RocketMQ: keyHash is CRC32 of the UTF-8 key (RocketMQ uses Java's
String.hashCode); it is only a prefilter, lookups always verify the message itself.
Files are named by the creation time (yyyyMMddHHmmssSSS). Index entries are hints: a lookup
returns candidate commit-log offsets that the caller checks against the real message.

A file is made at its full size (~420 MB by default) with the header, every slot (slots are
written anywhere) and ENTRY_WINDOW of entries backed by disk blocks (~24 MB); entries are
written in order, and ``put`` backs the next window before it writes past the backed end
(the index builder usually has, in a worker thread, see index_service). On a full disk that
is DiskFull, raised before anything is written; a write into an unbacked page would be
SIGBUS instead, which kills the broker.
"""

from __future__ import annotations

import struct
import time
import zlib
from functools import lru_cache
from itertools import chain

import numpy as np

from .mapped_file import MappedFile

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
_COUNT = struct.Struct(">i")
_POS_COUNT = INDEX_HEADER_SIZE - _COUNT.size  # indexCount, the header's last field
SLOT = struct.Struct(">i")
INDEX_ENTRY = struct.Struct(">iqii")
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
_ENTRY = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])  # INDEX_ENTRY
_BLOCK_MIN = 32  # entries from which put_many writes with numpy (a Spark chunk's ids: 512)
ENTRY_WINDOW = 4 << 20  # entries backed by disk blocks at first, and per extension


KEY_HASH_MASK = 0x7FFFFFFF  # a key hash is the CRC32 of ``topic#key`` as a non-negative int32


def key_hash(key: str) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogateescape")) & KEY_HASH_MASK


def key_hashes(prefix: bytes, keys: bytes, size: int) -> np.ndarray:
    """`key_hash` of ``prefix + key`` for each key of ``keys``, keys of ``size`` bytes back to
    back (an inner batch's 32-character ids, joined), as int64, without a CRC call per key:
    CRC32 is linear, so for keys of one length crc(k) = crc(k0) ^ crc'(k ^ k0), crc' being
    the CRC with no initial or final xor, itself the xor of one table entry per byte where
    k and k0 differ (the last few bytes of ids counted up from one head)."""
    rows = np.frombuffer(keys, np.uint8).reshape(-1, size)
    first = zlib.crc32(keys[:size], zlib.crc32(prefix))
    diff = rows ^ rows[0]
    columns = np.flatnonzero(diff.any(axis=0))
    crcs = np.bitwise_xor.reduce(_byte_crcs(size)[columns, diff[:, columns]], axis=1)
    return ((crcs ^ np.uint32(first)) & np.uint32(KEY_HASH_MASK)).astype(np.int64)


@lru_cache(maxsize=8)
def _byte_crcs(size: int) -> np.ndarray:
    """[j, b]: crc' (see `key_hashes`) of ``size`` zero bytes but byte j, which is b."""
    zero = zlib.crc32(bytes(size))
    out = np.empty((size, 256), np.uint32)
    for j in range(size):
        key = bytearray(size)
        for b in range(256):
            key[j] = b
            out[j, b] = zlib.crc32(key) ^ zero
    return out


def index_file_size(slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + slot_num * SLOT.size + index_num * INDEX_ENTRY_SIZE


class IndexFile:
    def __init__(self, path: str, slot_num: int, index_num: int, *, create: bool) -> None:
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        size = index_file_size(slot_num, index_num)
        self._entries_base = INDEX_HEADER_SIZE + slot_num * SLOT.size
        # backed: the header and slots, and a window of entries (a file loaded from disk
        # is backed from 0 by its first put); entries fill as keys arrive
        self.file = MappedFile(path, size, create=create, window=ENTRY_WINDOW,
                               head=self._entries_base)
        self.view = self.file.view
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = INDEX_HEADER.unpack_from(self.view, 0)
        if self.index_count == 0:
            self.index_count = 1  # position 0 means "empty slot"

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def entries_end(self) -> int:
        """The file position just past the next entry to write."""
        return self._entries_base + (self.index_count + 1) * INDEX_ENTRY_SIZE

    def put(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Index ``key``; False when the file is full. DiskFull (nothing written) when the
        next entry needs disk blocks the disk has no room for."""
        return self.put_raw(key_hash(key), phy_offset, store_timestamp)

    def put_raw(self, h: int, phy_offset: int, store_timestamp: int) -> bool:
        """`put` of a key given as its `key_hash` (the builder hashes the key's bytes as
        stored, without decoding them)."""
        if self.index_count >= self.index_num:
            return False
        end = self._entries_base + (self.index_count + 1) * INDEX_ENTRY_SIZE
        if end > self.file.backed:  # a file loaded from disk is backed from 0 (slots too)
            self.file.ensure_backed(end)
        slot_pos = INDEX_HEADER_SIZE + (h % self.slot_num) * SLOT.size
        (prev,) = SLOT.unpack_from(self.view, slot_pos)
        if prev <= 0 or prev >= self.index_count:
            prev = 0
        first = self.begin_timestamp == 0
        if first:
            self.begin_timestamp = store_timestamp
            self.begin_phy_offset = phy_offset
        time_diff = max(0, (store_timestamp - self.begin_timestamp) // 1000)
        pos = self._entries_base + self.index_count * INDEX_ENTRY_SIZE
        INDEX_ENTRY.pack_into(self.view, pos, h, phy_offset, time_diff, prev)
        SLOT.pack_into(self.view, slot_pos, self.index_count)
        if prev == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_timestamp = store_timestamp
        self.end_phy_offset = phy_offset
        # the count with every entry: a crash never leaves slots past it (a slot past the
        # count reads as empty, which would cut its chain); the rest at `write_header`
        if first:
            self.write_header()
        else:
            _COUNT.pack_into(self.view, _POS_COUNT, self.index_count)
        return True

    def put_many(self, entries: list[tuple[int, int, int]], start: int = 0) -> int:
        """`put_raw` of ``entries[start:]`` ((key hash, phy offset, store timestamp), in log
        order) in one loop: what a bulk builder (a catching-up slave's dispatch) writes per
        received chunk. Returns the index of the first entry not written (the file full).
        DiskFull as `put_raw`, raised before any but the first is written.

        The count is written once, first, for all of them: an entry is reachable only from
        its slot, written after it, so a process killed in the loop leaves a slot past the
        count never (a slot past it would read as empty and cut its chain), at worst entries
        within the count that no slot names."""
        if start >= len(entries):
            return start
        start, stop = self._open_run(len(entries), start, *entries[start])
        if stop - start >= _BLOCK_MIN:
            block = np.fromiter(chain.from_iterable(entries[start:stop]), np.int64,
                                3 * (stop - start)).reshape(-1, 3)  # ~4x np.array's speed
            self._put_block(block[:, 0], block[:, 1], block[:, 2])
        elif stop > start:
            self._put_loop(entries[start:stop])
        return stop

    def put_hashes(self, hashes: np.ndarray, phy_offset: int, store_timestamp: int, start: int = 0) -> int:
        """`put_many` of the entries (``hashes[i]``, ``phy_offset``, ``store_timestamp``) from
        ``start`` on: keys of one stored record (an inner batch's ids) as an int64 array, with
        no tuple per key."""
        if start >= len(hashes):
            return start
        start, stop = self._open_run(len(hashes), start, int(hashes[start]), phy_offset, store_timestamp)
        if stop - start >= _BLOCK_MIN:
            self._put_block(hashes[start:stop], phy_offset, store_timestamp)
        elif stop > start:
            self._put_loop([(h, phy_offset, store_timestamp) for h in hashes[start:stop].tolist()])
        return stop

    def _open_run(self, n: int, start: int, h: int, phy_offset: int, store_timestamp: int) -> tuple[int, int]:
        """Before a bulk put of entries [start, n): the first one put as `put_raw` puts it
        (the header's begin fields, the backing), the rest's room backed and their count
        written; (first entry left to write, the end of those the file has room for)."""
        if self.index_count >= self.index_num or not self.put_raw(h, phy_offset, store_timestamp):
            return start, start
        start += 1
        count = self.index_count
        stop = min(n, start + self.index_num - count)  # the entries the file has room for
        if stop > start:
            end = self._entries_base + (count + stop - start) * INDEX_ENTRY_SIZE
            if end > self.file.backed:
                self.file.ensure_backed(end)
            _COUNT.pack_into(self.view, _POS_COUNT, count + stop - start)
        return start, stop

    def _put_loop(self, entries: list[tuple[int, int, int]]) -> None:
        """Entries written one by one after `_open_run` (a few: numpy's fixed cost is more)."""
        view, slot_num, begin, count = self.view, self.slot_num, self.begin_timestamp, self.index_count
        slot_of, entry_into, slot_into = SLOT.unpack_from, INDEX_ENTRY.pack_into, SLOT.pack_into
        used = self.hash_slot_count
        pos = self._entries_base + count * INDEX_ENTRY_SIZE
        for h, phy, ts in entries:
            slot_pos = INDEX_HEADER_SIZE + (h % slot_num) * 4
            (prev,) = slot_of(view, slot_pos)
            if prev <= 0 or prev >= count:
                prev = 0
                used += 1
            diff = (ts - begin) // 1000
            entry_into(view, pos, h, phy, diff if diff > 0 else 0, prev)
            slot_into(view, slot_pos, count)
            count += 1
            pos += INDEX_ENTRY_SIZE
        self.index_count, self.hash_slot_count = count, used
        _, self.end_phy_offset, self.end_timestamp = entries[-1]

    def _put_block(self, hashes: np.ndarray, phys: np.ndarray | int, stamps: np.ndarray | int) -> None:
        """`_put_loop` for many entries at once, writing the same bytes (``phys`` and
        ``stamps`` an array each, or one value for all): entry i goes to position
        ``count + i``, chained to the last earlier entry of its slot (in this block, else
        the slot's entry if it is below the running count, else none), then every slot
        names its last entry. Entries are written before the slots that name them."""
        k, count = len(hashes), self.index_count
        slots = hashes % self.slot_num
        index = np.arange(count, count + k)
        slot_array = np.frombuffer(self.view, ">i4", self.slot_num, INDEX_HEADER_SIZE)
        ordered = np.sort(slots)
        same = ordered[1:] == ordered[:-1]
        if same.any():  # a slot twice in the block (rare: 512 ids in 5,000,000 slots)
            order = np.argsort(slots, kind="stable")  # by slot, in log order within one
            prev = np.empty(k, np.int64)
            prev[order[1:]] = np.where(same, index[order[:-1]], -1)
            prev[order[0]] = -1
            first = prev < 0  # the first entry of its slot in the block: chained to the slot's
            stored = slot_array[slots[first]].astype(np.int64)
            prev[first] = np.where((stored > 0) & (stored < index[first]), stored, 0)
            last = np.empty(k, bool)
            last[-1] = True
            np.logical_not(same, out=last[:-1])
            named, names = ordered[last], index[order[last]]
        else:  # every entry is the first and the last of its slot in the block
            stored = slot_array[slots].astype(np.int64)
            prev = np.where((stored > 0) & (stored < index), stored, 0)
            named, names = slots, index
        pos = self._entries_base + count * INDEX_ENTRY_SIZE
        out = np.frombuffer(self.view, _ENTRY, k, pos)  # written in place
        out["hash"], out["phy"], out["prev"] = hashes, phys, prev
        out["diff"] = np.maximum((np.asarray(stamps) - self.begin_timestamp) // 1000, 0)
        slot_array[named] = names
        self.hash_slot_count += int((prev == 0).sum())
        self.index_count = count + k
        self.end_phy_offset = int(phys if isinstance(phys, int) else phys[-1])
        self.end_timestamp = int(stamps if isinstance(stamps, int) else stamps[-1])

    def write_header(self) -> None:
        """Every header field as it is in memory (the end timestamp and offset, the slots
        used), on the loop: before a sync (the index service's `dirty_files`) and at
        close. Lookups read the fields from memory; a file loaded after a crash may have
        older ones until the builder indexes past them."""
        INDEX_HEADER.pack_into(self.view, 0, self.begin_timestamp, self.end_timestamp,
                               self.begin_phy_offset, self.end_phy_offset,
                               self.hash_slot_count, self.index_count)

    def overlaps(self, begin: int, end: int) -> bool:
        return self.begin_timestamp <= end and self.end_timestamp >= begin

    def lookup(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Candidate commit-log offsets, newest first, stored within [begin, end] ms."""
        h = key_hash(key)
        (pos,) = SLOT.unpack_from(self.view, INDEX_HEADER_SIZE + (h % self.slot_num) * SLOT.size)
        found: list[int] = []
        seen = 0
        while 0 < pos < self.index_count and len(found) < max_num and seen < self.index_num:
            seen += 1
            eh, phy, diff, prev = INDEX_ENTRY.unpack_from(self.view, self._entries_base + pos * INDEX_ENTRY_SIZE)
            ts = self.begin_timestamp + diff * 1000
            if eh == h and begin - 999 <= ts <= end:
                found.append(phy)
            if prev <= 0 or prev >= pos:
                break
            pos = prev
        return found

    def sync(self) -> None:
        self.file.sync()

    def destroy(self) -> None:
        self.file.destroy()

    def close(self) -> None:
        self.write_header()
        self.file.close()


def index_file_name(now_ms: int | None = None) -> str:
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms / 1000)) + f"{ms % 1000:03d}"

