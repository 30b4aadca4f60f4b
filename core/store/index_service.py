"""IndexService: builds IndexFiles from the CommitLog behind the dispatcher.

It walks the log from its own watermark (``built_offset``) in slices of SLICE_S of work and,
while the store is storing or serving messages, sleeps nine times as long as each slice
took, so indexing takes at most a tenth of the loop and never holds it for long: a slice
may stop inside a stored record batch and resume there. When its sleep ends late the loop
is busy serving requests (or the process is short of CPU), and every slice then lengthens
the queue those requests wait in: the builder sleeps twice as long after each late wake-up,
down to 1% of the loop, and halves it again once wake-ups are on time. Under a burst it
lags; once nothing was stored or read since its last slice, or the oldest record it has not
indexed was stored more than MAX_LAG_MS ago, it only yields between slices, so it catches up
at full speed while a request that arrives waits one slice at most; behind while the
store is busy, each slice lasts as long as the loop spent elsewhere since the last one (up
to MAX_SLICE_S), an even share of the loop: a loop iteration serving a busy publisher is far
longer than SLICE_S, so fixed slices would fall behind again. The bound keeps
a keyed write rate the throttled share cannot index (a loop busy with sends leaves the
builder 1%) from falling behind for good: the work is owed either way, and deferring it
only makes lookups miss.
Keys indexed per message: ``topic#KEYS`` (each key), ``topic#UNIQ_KEY`` and ``topic#DEDUP_KEY``
(what the producer dedup window recalls after a restart, core/dedup.py); the records of
an inner batch are indexed by their Kafka key (their KEYS, see core.batch.messages), and by
a UNIQ_KEY header where a batch's payload names one (decoded once, see
`_index_unique_headers`; for a chunk of values each with its id alone, the Spark writer's,
the put path hands the ids over instead: `inner_ids`), and the batch by the DEDUP_KEY its
record carries; the keys
are read without decoding the records, from the payload the one expander holds
(core.store.inner_batch: a compressed batch is decompressed once for the index and every
reader); a batch of keyless records with equal-size values (what most keyless producers
send) is recognised in one regular-expression pass instead (record_batch.all_keyless),
~6x cheaper than reading its records' keys. Lookups first index up to QUERY_CATCH_UP more
messages, so a key is findable as soon as its message can be consumed unless the index
lags further than that.

Index files are backed by disk blocks a window of entries at a time (see index_file): the
builder has the next window allocated in a worker thread before the current file's entries
get near the end of the backed range, and a put past it backs it itself. On a full disk
(DiskFull: a new file or a window that does not fit, refused before anything is written)
the builder stops at the record it was indexing and tries again every DISK_FULL_RETRY_S;
lookups meanwhile serve what is indexed, and the broker keeps serving everything else.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol
from zlib import crc32

import numpy as np

from rocketport.common.batch.record_batch import (
    ATTR_CONTROL,
    CorruptBatch,
    all_keyless,
    iter_payload_records,
    record_keys,
)
from rocketport.common.batch.messages import UNIQ_SIZE, unique_ids_only
from rocketport.common.message import (
    INNER_BATCH_FLAG,
    KEY_SEPARATOR,
    PROPERTY_DEDUP_KEY,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    UNIQ_KEY_NEEDLES,
    property_bytes,
    property_needles,
)

from ..errors import DiskFull
from .commitlog import CommitLog, now_ms
from .index_file import KEY_HASH_MASK, IndexFile, index_file_name, key_hashes
from .inner_batch import open_batch as open_stored_batch
from .mapped_file import creating, drop_if_empty
from .record import (
    BLANK_MAGIC_CODE,
    HEADER_SIZE,
    I32,
    I64,
    POS_STORE_TIMESTAMP,
    POS_SYS_FLAG,
    SIZE_MAGIC,
    parse_record_info,
    topic_and_properties,
)


class IndexedStore(Protocol):
    """What the index builder reads of the store: the log, how far it is dispatched (the
    builder never indexes past it), and its put and get counts (how busy it is)."""

    commitlog: CommitLog
    dispatched_offset: int
    put_count: int
    get_count: int

log = logging.getLogger(__name__)

_KEYS_NEEDLES = property_needles(PROPERTY_KEYS)
_DEDUP_NEEDLES = property_needles(PROPERTY_DEDUP_KEY)
_UNIQ_HEADER = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()  # a record header's name, in a payload
# every UNIQ_KEY header name in a payload (name length 8, a zigzag varint), with its value
# where that is 32 bytes long (length 32: 0x40), else b""
_UNIQ_IDS = re.compile(b"\x10" + _UNIQ_HEADER + b"(?:\x40(.{32})|)", re.DOTALL).findall
_KEY_SEPARATOR = KEY_SEPARATOR.encode()
PREFIX_CACHE = 4096  # topics whose ``topic#`` key prefix is kept
KEYLESS_SPANS = 4096  # keyless log ranges and batch sends remembered ahead of the walk
SENDS_HELD = 1 << 16  # records whose properties the remembered batch sends may hold (~10 MB)
IDS_HELD = 1 << 20  # ids the remembered inner batches may hold, as key hashes (8 MB)
# a stored record batch's attributes (int16, 21 bytes into the batch, which is the body)
_BATCH_ATTRIBUTES = struct.Struct(">h")
_POS_BATCH_ATTRIBUTES = HEADER_SIZE + 21


SLICE_S = 0.0005  # work per slice: what a request may wait behind the builder
KEY_CHUNK = 256  # records of a batch read between two checks of the slice's deadline
UNIFORM_CHECK_MAX = 8192  # records a batch may have for one all_keyless pass (~0.4 ms)
IDLE_POLL_S = 0.2
BACKOFF = 9  # sleep 9x the time a slice took: indexing takes <= 10% of a core under load
MAX_BACKOFF = 99  # while the loop is busy: <= 1%
LATE_S = 0.002  # a wake-up this late means the loop is busy (uvloop's timers have 1 ms steps)
MAX_LAG_MS = 100  # the oldest record not yet indexed may be this old before the builder stops pausing
MAX_SLICE_S = 0.05  # the longest slice, taken while the builder is further behind than that
DISK_FULL_RETRY_S = 1.0  # how often the builder tries again while the disk is full


@dataclass(slots=True)
class _OpenBatch:
    """A stored record batch a slice stopped inside: where to resume reading its keys."""

    phys: int
    data: bytes  # the records payload (decompressed, the expander's): valid across slices
    pos: int
    left: int


@dataclass(slots=True)
class _Sends:
    """A batch send's records as the writer stored them (see `IndexService.sends`)."""

    topic: bytes
    store_ts: int
    offsets: list[int]
    properties: list[bytes]


def names_index_keys(props: bytes) -> bool:
    """Whether encoded properties may hold KEYS, UNIQ_KEY or DEDUP_KEY (False: surely none)."""
    return _KEYS_NEEDLES[1] in props or UNIQ_KEY_NEEDLES[1] in props or _DEDUP_NEEDLES[1] in props


class IndexService:
    def __init__(self, directory: str, slot_num: int, index_num: int, *, enabled: bool) -> None:
        self.directory = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.enabled = enabled
        self.files: list[IndexFile] = []
        self.built_offset = 0
        self._dirty: set[IndexFile] = set()
        self._prefixes: dict[bytes, bytes] = {}
        self._open: _OpenBatch | None = None
        # (end, key) of the last record whose DEDUP_KEY the walk saw (see _index_record)
        self._dedup_run: tuple[int, bytes] = (-1, b"")
        # (start, end, records, sends) of log ranges written with no key to index (see
        # `keyless`; sends None), by one batch send (see `sends`: _Sends), or as one inner
        # batch whose only keys are its records' ids (see `inner_ids`: their key hashes)
        self._spans: deque[tuple[int, int, int, _Sends | np.ndarray | None]] = deque()
        self._held = 0  # records of the _Sends in _spans
        self._held_ids = 0  # ids in _spans
        self._stopping = False
        self._wakeup: asyncio.Event | None = None
        self.disk_full: DiskFull | None = None  # why the last build stopped short, if so

    def load(self) -> None:
        if not os.path.isdir(self.directory):
            return
        for name in sorted(os.listdir(self.directory)):
            if name.isdigit():
                path = os.path.join(self.directory, name)
                if drop_if_empty(path):
                    continue
                try:
                    self.files.append(IndexFile(path, self.slot_num, self.index_num, create=False))
                except ValueError as exc:
                    log.error("ignoring index file %s: %s", name, exc)

    def recover(self, from_offset: int, log_end: int) -> None:
        self.built_offset = min(from_offset, log_end)

    def keyless(self, start: int, end: int, records: int) -> None:
        """The writer's word that the log's bytes [start, end) are ``records`` plain records
        none of whose properties name KEYS or UNIQ_KEY (a run of alike AMQP publishes): the
        walk steps over them instead of reading each. Kept in memory only, and the oldest
        are forgotten past KEYLESS_SPANS: a range not known is walked, which is always right."""
        if not self.enabled:
            return
        spans = self._spans
        if spans and spans[-1][1] == start and spans[-1][3] is None:  # one publisher's runs: one range
            first, _, count, _ = spans.pop()
            start, records = first, count + records
        self._remember((start, end, records, None))

    def sends(self, start: int, end: int, topic: bytes, store_ts: int, offsets: list[int],
              properties: list[bytes]) -> None:
        """The writer's word that the log's bytes [start, end) are the plain records of one
        batch send of ``topic`` (their offsets, the store timestamp they share, and each
        one's encoded properties, which `put_message_batch` slices anyway): the walk indexes
        them in bulk from these (`_index_sends`) instead of reading each record. Kept in
        memory as `keyless`, up to SENDS_HELD records: a range not known is walked."""
        if self.enabled:
            self._remember((start, end, len(offsets), _Sends(topic, store_ts, offsets, properties)))

    def inner_ids(self, start: int, end: int, topic: bytes, ids: list[bytes]) -> None:
        """The writer's word that the log's bytes [start, end) are one inner batch of
        ``topic`` whose records' only keys are these UNIQ_KEYs, 32 characters each
        (messages.unique_ids_only, which the put path checks anyway): the walk indexes them
        and the batch's DEDUP_KEY without opening the batch (`_index_ids`). Kept in memory
        as `sends`, as their key hashes (8 bytes an id: a builder a second of writes behind
        still finds them), up to IDS_HELD."""
        if self.enabled:
            self._remember((start, end, len(ids),
                            key_hashes(self._prefix(topic), b"".join(ids), UNIQ_SIZE)))

    def _remember(self, span: tuple[int, int, int, _Sends | np.ndarray | None]) -> None:
        spans = self._spans
        if isinstance(span[3], _Sends):
            self._held += span[2]
        elif span[3] is not None:
            self._held_ids += span[2]
        while spans and (len(spans) >= KEYLESS_SPANS or self._held > SENDS_HELD or self._held_ids > IDS_HELD):
            self._forget()  # the oldest: the walk reads those records itself
        spans.append(span)

    def _forget(self) -> None:
        _, _, count, known = self._spans.popleft()
        if isinstance(known, _Sends):
            self._held -= count
        elif known is not None:
            self._held_ids -= count

    # -- building --------------------------------------------------------------------------
    def _current(self, now_ms: int) -> IndexFile:
        if not self.files or self.files[-1].is_full:
            os.makedirs(self.directory, exist_ok=True)
            name = index_file_name(now_ms)
            while any(os.path.basename(f.path) == name for f in self.files):
                name = str(int(name) + 1)
            path = os.path.join(self.directory, name)
            with creating(path):  # a full disk: DiskFull, the file removed again
                self.files.append(IndexFile(path, self.slot_num, self.index_num, create=True))
        return self.files[-1]

    def _put(self, key: bytes, phys: int, store_ts: int) -> None:
        """Index ``key`` (``topic#key`` as UTF-8, the bytes `key_hash` hashes)."""
        h = crc32(key) & KEY_HASH_MASK
        f = self._current(store_ts)
        if not f.put_raw(h, phys, store_ts):
            f = self._current(store_ts)
            f.put_raw(h, phys, store_ts)
        self._dirty.add(f)

    def prefix(self, topic: bytes) -> bytes:
        """``topic#`` for a topic's bytes as a record stores them (what keys are hashed under)."""
        return self._prefix(topic)

    def index_record(self, view: memoryview, pos: int, phys: int) -> None:
        """Index the plain record at ``pos`` of ``view`` (log offset ``phys``) now, for a
        caller that walks the log itself and moves ``built_offset`` past it (a slave's dispatch)."""
        self._index_record(view, pos, phys)

    @property
    def idle_at_record(self) -> bool:
        """Whether the builder stopped between records (not inside a record batch)."""
        return self._open is None

    def put_entries(self, entries: list[tuple[int, int, int]]) -> None:
        """Index ``entries`` ((key hash, phys, store timestamp), in log order) in bulk across
        full files: how a catching-up slave's dispatch indexes a received chunk
        (core/store/replica.py). DiskFull as `_put` (the entries before it are written)."""
        i, n = 0, len(entries)
        while i < n:
            f = self._current(entries[i][2])
            self._dirty.add(f)
            i = f.put_many(entries, i)

    def put_hashes(self, hashes: np.ndarray, phys: int, store_ts: int) -> None:
        """Index keys of one record given as their `key_hash`es (int64), in bulk across full
        files; DiskFull as `put_entries`."""
        i, n = 0, len(hashes)
        while i < n:
            f = self._current(store_ts)
            self._dirty.add(f)
            i = f.put_hashes(hashes, phys, store_ts, i)

    def _prefix(self, topic: bytes) -> bytes:
        """``topic#`` as `lookup` encodes it, for a topic name as a record stores it."""
        prefix = self._prefixes.get(topic)
        if prefix is None:
            if len(self._prefixes) >= PREFIX_CACHE:
                self._prefixes.clear()
            prefix = self._prefixes[topic] = (
                topic.decode("utf-8", "replace").encode("utf-8", "surrogateescape") + b"#")
        return prefix

    def build(self, store: IndexedStore, max_records: int = sys.maxsize,
              deadline: float | None = None) -> int:
        """Index up to ``max_records`` records below the store's dispatched offset, stopping
        once ``perf_counter()`` passes ``deadline``; returns the records walked.

        Records below the dispatched offset are known good, so the walk reads only what it
        needs at fixed positions (size, sys flag, body length, topic and properties bytes)
        and looks KEYS and UNIQ_KEY up undecoded: a record with neither costs a few
        struct reads, not a decoded header and properties dict; a range the writer said is
        keyless (`keyless`) costs nothing per record.

        When the disk has no room for an index file or its next window, the walk stops at
        the record being indexed (``disk_full`` says why; a later build indexes it again
        whole: keys it had already put are found twice, which lookups dedupe)."""
        self.disk_full = None
        limit = store.dispatched_offset
        if not self.enabled:
            self.built_offset = limit
            return 0
        phys = max(self.built_offset, store.commitlog.min_offset)
        if phys >= limit:
            return 0
        find = store.commitlog.queue.find
        size_magic, int32, attributes = SIZE_MAGIC.unpack_from, I32.unpack_from, _BATCH_ATTRIBUTES.unpack_from
        spans = self._spans
        n = 0
        while phys < limit:
            mf = find(phys)
            if mf is None:
                break
            view, base, size = mf.view, mf.file_from_offset, mf.file_size
            pos = phys - base
            end = min(size, limit - base)
            try:
                while pos < end:
                    if n >= max_records or (deadline is not None and time.perf_counter() >= deadline):
                        self.built_offset = base + pos
                        return n
                    total, magic = size_magic(view, pos)
                    if magic == BLANK_MAGIC_CODE:
                        pos = size
                        break
                    if spans:
                        here = base + pos
                        while spans and spans[0][1] <= here:  # behind the walk
                            self._forget()
                        if (spans and spans[0][0] == here and spans[0][2] <= max_records - n
                                and self._open is None):  # not a batch half walked already
                            _, span_end, count, known = spans[0]
                            if isinstance(known, _Sends):  # DiskFull: the walk reads them again
                                self._index_sends(known, span_end, pos == 0)
                            elif known is not None:
                                self._index_ids(view, pos, here, known)
                            self._forget()
                            n += count
                            pos = span_end - base
                            continue
                    if int32(view, pos + POS_SYS_FLAG)[0] & INNER_BATCH_FLAG:
                        if attributes(view, pos + _POS_BATCH_ATTRIBUTES)[0] & ATTR_CONTROL:
                            n += 1  # a transaction marker: one record, no message's key
                            pos += total
                            continue
                        info = parse_record_info(view, pos, size, False)
                        done, finished = self._index_batch(store, base + pos, info, max_records - n,
                                                           deadline)
                        n += done
                        if not finished:
                            self.built_offset = base + pos
                            return n
                    else:
                        n += 1
                        self._index_record(view, pos, base + pos)
                    pos += total
            except DiskFull as exc:
                self.built_offset = base + pos
                self._open = None
                self.disk_full = exc
                return n
            phys = base + (size if pos >= size else pos)
        self.built_offset = min(phys, limit)
        return n

    def back_ahead(self) -> tuple[IndexFile, int] | None:
        """(file, end) when the current index file's entries are within half a window of
        its backed end: back it to ``end`` (off the loop) before the builder gets there."""
        if not self.files:
            return None
        f = self.files[-1]
        mf = f.file
        if f.is_full or mf.backed >= mf.file_size:
            return None
        end = f.entries_end
        if end + mf.window // 2 < mf.backed:
            return None
        return f, end + mf.window

    def _index_batch(self, store: IndexedStore, phys: int, info, max_records: int,
                     deadline: float | None) -> tuple[int, bool]:
        """Index the keys of (part of) a stored record batch, from where the last slice
        stopped inside it; returns (records walked, whether the batch is done)."""
        open_batch = self._open
        if open_batch is not None and open_batch.phys == phys:
            data, pos, left = open_batch.data, open_batch.pos, open_batch.left
        else:
            view = store.commitlog.written(phys, info.total_size)
            try:
                batch = open_stored_batch(view).batch
            except CorruptBatch as exc:
                log.error("cannot index batch at %d: %s", phys, exc)
                return 1, True
            left, data = batch.count, batch.payload
            dedup = property_bytes(topic_and_properties(view, 0)[2], _DEDUP_NEEDLES)
            if dedup:  # a batch sent as one unit (core/dedup.py): what a recall looks up
                self._put(self._prefix(info.topic.encode("utf-8", "surrogateescape")) + dedup,
                          phys, info.store_timestamp)
            # one search: most batches carry no such header
            if _UNIQ_HEADER in data and self._index_unique_headers(data, left, phys, info):
                return left, True  # indexed whole: the records have no key
            if left <= UNIFORM_CHECK_MAX and all_keyless(data):  # nothing to index: no keys
                return left, True
            pos = 0
        self._open = None
        prefix, ts = self._prefix(info.topic.encode("utf-8", "surrogateescape")), info.store_timestamp
        n = 0
        try:
            while left and n < max_records:
                step = min(KEY_CHUNK, left, max_records - n)
                keys, pos = record_keys(data, pos, step)
                left -= step
                n += step
                if keys:
                    for key in dict.fromkeys(keys):  # a key repeated within a chunk: one entry
                        self._put(prefix + key, phys, ts)
                if deadline is not None and time.perf_counter() >= deadline:
                    break
        except CorruptBatch as exc:
            log.error("cannot index batch at %d: %s", phys, exc)
            left = 0
        if left:
            self._open = _OpenBatch(phys, data, pos, left)
        return max(n, 1), not left

    def _index_unique_headers(self, data: bytes, count: int, phys: int, info) -> bool:
        """``topic#UNIQ_KEY`` for each record of a batch with a UNIQ_KEY header (a producer
        naming its messages as RocketMQ clients do), so `message_by_unique_key` finds the
        records of a batch as it finds single messages; True when the records are known to
        have no key (nothing else to index). Decodes the batch's records, once, when it is
        first opened (the search that sends a batch here is a false hint at worst). The
        shapes RocketMQ's ids take, one 32-character id a record, are read in one pass and
        indexed in bulk: keyless records of equal-size values with the id as their only
        header (the Spark writer's chunks, when the put path did not name them already:
        `unique_ids_only`, which also tells they have no key), else any records where every
        name found is such a header and there is one a record (`_UNIQ_IDS`); anything else
        is decoded."""
        prefix, ts = self._prefix(info.topic.encode("utf-8", "surrogateescape")), info.store_timestamp
        keyless = unique_ids_only(data, count)
        ids = keyless if keyless is not None else _UNIQ_IDS(data)
        if len(ids) == count and b"" not in ids:
            self.put_hashes(key_hashes(prefix, b"".join(ids), UNIQ_SIZE), phys, ts)
            return ids is keyless
        try:
            for record in iter_payload_records(data, count):
                for name, value in record.headers:
                    if name == PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX and value:
                        self._put(prefix + value, phys, ts)
        except CorruptBatch as exc:
            log.error("cannot index batch at %d: %s", phys, exc)
        return False

    def _index_ids(self, view: memoryview, pos: int, phys: int, hashes: np.ndarray) -> None:
        """What `_index_batch` indexes of the inner batch at ``pos`` (log offset ``phys``)
        whose records' only keys are the ids of these key hashes (`inner_ids`), in the same
        order, without opening the batch: its DEDUP_KEY, then every id."""
        topic_start, topic_end, props = topic_and_properties(view, pos)
        ts = I64.unpack_from(view, pos + POS_STORE_TIMESTAMP)[0]
        dedup = property_bytes(props, _DEDUP_NEEDLES)
        if dedup:
            self._put(self._prefix(bytes(view[topic_start:topic_end])) + dedup, phys, ts)
        self.put_hashes(hashes, phys, ts)

    def _index_record(self, view: memoryview, pos: int, phys: int) -> None:
        """``topic#key`` for each of a plain record's KEYS, ``topic#UNIQ_KEY`` and
        ``topic#DEDUP_KEY``; DEDUP_KEY only for the first record of a run of records that
        follow each other in one segment with that key (a batch send's unit): the dedup
        window's recall reads the run from there (core/dedup.py)."""
        topic_start, topic_end, props = topic_and_properties(view, pos)
        if names_index_keys(props):  # else an AMQP or STOMP message: three scans, no split
            self._index_properties(props, bytes(view[topic_start:topic_end]),
                                   I64.unpack_from(view, pos + POS_STORE_TIMESTAMP)[0], phys,
                                   phys + I32.unpack_from(view, pos)[0], pos == 0)

    def _index_properties(self, props: bytes, topic: bytes, store_ts: int, phys: int, end: int,
                          opens_segment: bool) -> None:
        """`_index_record`'s keys of the record [phys, end) with encoded properties ``props``."""
        keys = property_bytes(props, _KEYS_NEEDLES)
        uniq = property_bytes(props, UNIQ_KEY_NEEDLES)
        dedup = property_bytes(props, _DEDUP_NEEDLES)
        if not (keys or uniq or dedup):
            return
        prefix = self._prefix(topic)
        if keys:
            for k in keys.split(_KEY_SEPARATOR):
                if k:
                    self._put(prefix + k, phys, store_ts)
        if uniq:
            self._put(prefix + uniq, phys, store_ts)
        if dedup:
            key = prefix + dedup
            if opens_segment or self._dedup_run != (phys, key):
                self._put(key, phys, store_ts)
            self._dedup_run = (end, key)

    def _index_sends(self, sends: _Sends, end: int, opens_segment: bool) -> None:
        """`_index_record` of each record of one batch send (ending at ``end``), in bulk:
        when no record names KEYS and the DEDUP_KEY, if any, is every record's one (the
        facade stores a batch naming one here only then: the Spark sink's chunks), one
        UNIQ_KEY read and one CRC a record and a single `put_entries`; else record by record."""
        props, offsets, ts = sends.properties, sends.offsets, sends.store_ts
        n = len(offsets)
        joined = b"\x02" + b"\x02".join(props) + b"\x02"  # every property between separators
        if _KEYS_NEEDLES[0] not in joined:
            dedups = joined.count(_DEDUP_NEEDLES[0])
            dedup = property_bytes(props[0], _DEDUP_NEEDLES) if dedups == n else None
            if not dedups or (dedup and joined.count(_DEDUP_NEEDLES[0] + dedup + b"\x02") == n):
                prefix = self._prefix(sends.topic)
                seed = crc32(prefix)
                find, needles = property_bytes, UNIQ_KEY_NEEDLES
                entries = [(crc32(uniq, seed) & KEY_HASH_MASK, phys, ts)
                           for uniq, phys in zip([find(p, needles) for p in props], offsets) if uniq]
                if dedup:
                    key = prefix + dedup
                    if opens_segment or self._dedup_run != (offsets[0], key):
                        entries.insert(0, (crc32(key) & KEY_HASH_MASK, offsets[0], ts))
                    self._dedup_run = (end, key)
                self.put_entries(entries)
                return
        for p, phys, next_phys in zip(props, offsets, [*offsets[1:], end]):
            self._index_properties(p, sends.topic, ts, phys, next_phys, opens_segment and phys == offsets[0])

    async def run(self, store: IndexedStore) -> None:
        self._wakeup = asyncio.Event()
        backoff = BACKOFF
        traffic = -1
        behind = False  # the last slice left the index further behind than MAX_LAG_MS
        ended = 0.0  # when the last slice ended
        paused: DiskFull | None = None
        ahead_again = 0.0  # after a failed extension ahead (a full disk), not before this
        while not self._stopping:
            ahead = self.back_ahead()
            if ahead is not None and time.monotonic() >= ahead_again:
                try:  # allocate the next window in a thread, not on the loop
                    await asyncio.to_thread(ahead[0].file.extend_backing, ahead[1])
                except (DiskFull, OSError):  # the builder's own put tries again, and
                    ahead_again = time.monotonic() + DISK_FULL_RETRY_S  # reports a full disk
            started = time.perf_counter()
            # behind while the store is busy: a slice as long as the loop spent elsewhere
            # since the last one (an even share of the loop), up to MAX_SLICE_S
            slice_s = min(MAX_SLICE_S, max(SLICE_S, started - ended)) if behind else SLICE_S
            try:
                done = self.build(store, deadline=started + slice_s)
            except Exception:
                log.exception("index build failed at %d", self.built_offset)
                done = 0
            if self.disk_full is not None:
                if paused is None:
                    log.warning("index building paused at %d: %s", self.built_offset, self.disk_full)
                paused = self.disk_full
                try:  # lookups and everything else go on meanwhile (the event: stop)
                    await asyncio.wait_for(self._wakeup.wait(), DISK_FULL_RETRY_S)
                except asyncio.TimeoutError:
                    pass
                continue
            if paused is not None and done:
                log.info("index building resumed at %d", self.built_offset)
                paused = None
            if done:
                seen = store.put_count + store.get_count
                busy, traffic = seen != traffic, seen  # stored or read since the last slice
                behind = busy and self.lag_ms(store) > MAX_LAG_MS
                ended = time.perf_counter()
                if not busy or behind:  # idle, or too far behind: no pause
                    await asyncio.sleep(0)  # a request that arrives waits one slice at most
                    continue
                # leave the loop to the puts: at most 1 / (1 + backoff) of a core
                now = time.perf_counter()
                # never past half the lag bound: a slice stretched by a busy machine times the
                # backoff would otherwise sleep up to a second while the lag grows past it
                pause = min(MAX_LAG_MS / 2000, (now - started) * backoff)
                await asyncio.sleep(pause)
                if time.perf_counter() - now - pause > LATE_S:
                    backoff = min(MAX_BACKOFF, backoff * 2 + 1)
                else:
                    backoff = max(BACKOFF, backoff // 2)
            else:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), IDLE_POLL_S)
                except asyncio.TimeoutError:
                    pass

    def lag_ms(self, store: IndexedStore) -> int:
        """How long ago the oldest record not indexed yet was stored (0: none)."""
        if self.built_offset >= store.dispatched_offset:
            return 0
        mf = store.commitlog.queue.find(self.built_offset)
        if mf is None:
            return 0
        pos = self.built_offset - mf.file_from_offset
        if pos + HEADER_SIZE > mf.file_size or SIZE_MAGIC.unpack_from(mf.view, pos)[1] == BLANK_MAGIC_CODE:
            return 0
        return now_ms() - I64.unpack_from(mf.view, pos + POS_STORE_TIMESTAMP)[0]

    async def catch_up(self, store: IndexedStore, offset: int) -> None:
        """Return once every record below ``offset`` (at most the dispatched offset) is
        indexed, building a slice at a time with the loop free between: what a lookup that
        must not miss a record below ``offset`` awaits. Returns early on a full disk (the
        lookup then sees what is indexed)."""
        offset = min(offset, store.dispatched_offset)
        while self.built_offset < offset:
            if not self.build(store, deadline=time.perf_counter() + SLICE_S) or self.disk_full:
                return
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stopping = True
        if self._wakeup is not None:
            self._wakeup.set()

    # -- lookups ---------------------------------------------------------------------------
    def lookup(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        found: list[int] = []
        for f in reversed(self.files):
            if f.overlaps(begin, end):
                found.extend(f.lookup(key, max_num - len(found), begin, end))
                if len(found) >= max_num:
                    break
        return found

    def dirty_files(self) -> list[IndexFile]:
        """The files written since the last call, their headers brought up to date (here,
        on the loop: a worker thread syncs them)."""
        dirty, self._dirty = list(self._dirty), set()
        for f in dirty:
            f.write_header()
        return dirty

    def delete_before(self, min_offset: int) -> None:
        keep = []
        for f in self.files:
            if f is not self.files[-1] and f.end_phy_offset < min_offset:
                f.destroy()
            else:
                keep.append(f)
        self.files = keep

    def close(self) -> None:
        for f in self.files:
            f.close()
