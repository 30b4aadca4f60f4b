"""A slave's dispatch of a run of plain records in one go (numpy), for a catch-up's large reads.

`StoreReplica.dispatch_replicated` (core/store/replica.py) reads each record's fields, topic
and properties one by one: ~2.8 us a 1 KiB native record in Python, more than the worker
thread's write of it. `plain_block` does the same for the longest run of plain records from
a position at once (~0.6-0.9 us a record): their start positions (records of one size
checked in place as an array, others found by a loop that reads only each size, ~0.2 us),
then their fixed fields, topics and checks as arrays; their properties compared as an
array when each is a UNIQ_KEY alone of one length (a native client's message without tags
or keys), else read in one regular-expression pass over all of them, each behind a
marker the pass counts; the UNIQ_KEY hashes of a one-topic run through CRC32's linearity
(`index_file.key_hashes`). It stops before the first record the per-record path must take
(another magic, an inner batch, a record whose lengths do not add up or that names another
offset, a topic with a listener or a rule of its own, a DEDUP_KEY, a record the frame
cut): the caller goes on record by record there, which says what is wrong with it, if
anything. The entries and keys are the per-record path's, byte for byte
(tests/ha/test_replica_block.py compares a mixed log's with the master's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from zlib import crc32

import numpy as np

from rocketport.common.message import BORNHOST_V6_FLAG, INNER_BATCH_FLAG, STOREHOSTADDRESS_V6_FLAG
from rocketport.common.tags import tags_code_of_value

from .index_file import KEY_HASH_MASK, key_hashes
from .record import FIXED_SIZE, HEADER_SIZE, MESSAGE_MAGIC_CODE, SIZE_MAGIC
from .record_head import record_head

BLOCK_MIN = 32  # records: fewer are cheaper one by one (numpy's fixed cost)
BLOCK_MAX = 8192  # records a call takes at most (bounded arrays)
# the bytes a read must have left from a position for a block to be tried there, and the
# bytes the caller goes record by record after a failed try (a lag's small reads never try)
BLOCK_BYTES = 32 << 10
_IPV6_HOSTS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_CQ = np.dtype([("phys", ">i8"), ("size", ">i4"), ("code", ">i8")])  # consume_queue.CQ_ENTRY
# each record's properties behind b"\x02\x03" (a marker: the match with group 1) and the
# b"\x02" the per-record path puts before them: the same names, the same values
_PROPS = re.compile(rb"\x02(?:(\x03)|(TAGS|KEYS|UNIQ_KEY|DEDUP_KEY)\x01([^\x02]*))")


@dataclass(slots=True)
class Block:
    """What `plain_block` read: ``count`` records ending at segment position ``end``."""

    count: int
    end: int
    total_bytes: int
    # (topic, queue id, first queue offset, entries, CommitLog end, records) per run of a
    # queue's consecutive offsets, in log order within each queue
    runs: list[tuple[str, int, int, bytes, int, int]]
    keys: list[tuple[int, int, int]]  # (key hash, phys, store timestamp), log order
    lags: np.ndarray  # per-bucket counts (replica.LAG_BUCKETS)


def _starts(view: memoryview, pos: int, limit: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The start positions of the whole records from ``pos`` before ``limit`` whose magic
    is a message's, with their fixed fields in place when they all have the first one's
    size (a producer's fixed-size messages: no loop), else None (read one by one)."""
    total, magic = SIZE_MAGIC.unpack_from(view, pos)
    if magic != MESSAGE_MAGIC_CODE or total < FIXED_SIZE:
        return np.empty(0, np.int64), None
    count = min((limit - pos) // total, BLOCK_MAX)
    if count >= BLOCK_MIN:
        fixed = np.ndarray((count,), record_head(total), view, pos)
        same = (fixed["total"] == total) & (fixed["magic"] == MESSAGE_MAGIC_CODE)
        n = count if same.all() else int(np.argmin(same))
        if n >= BLOCK_MIN:
            return pos + total * np.arange(n, dtype=np.int64), fixed[:n]
    unpack = SIZE_MAGIC.unpack_from
    starts: list[int] = []
    add = starts.append
    p = pos
    while p + FIXED_SIZE <= limit and len(starts) < BLOCK_MAX:
        total, magic = unpack(view, p)
        if magic != MESSAGE_MAGIC_CODE or total < FIXED_SIZE or p + total > limit:
            break
        add(p)
        p += total
    return np.array(starts, np.int64), None


def plain_block(view: memoryview, base: int, pos: int, limit: int,
                topic_of_bytes: Callable[[bytes], str | None], prefix_crcs: dict[bytes, int],
                prefix: Callable[[bytes], bytes], codes: dict[bytes | None, int], index_keys: bool,
                now: int, lag_buckets: int) -> Block | None:
    """The plain records from segment position ``pos`` up to ``limit`` (the written end),
    or None when fewer than BLOCK_MIN of them come first. ``topic_of_bytes`` names a
    topic as the records store it (None: one the per-record path must take);
    ``prefix_crcs`` and ``codes`` are the per-record path's caches; ``prefix(topic
    bytes)`` the index's key prefix; ``index_keys`` whether the keys are wanted (the
    index has caught up with dispatch)."""
    s, fixed = _starts(view, pos, limit)
    n = len(s)
    if n < BLOCK_MIN:
        return None
    buf = np.frombuffer(view, np.uint8, limit)
    if fixed is None:
        fixed = np.empty(n, record_head())
        fixed.view(np.uint8).reshape(n, HEADER_SIZE)[:] = buf[s[:, None] + np.arange(HEADER_SIZE)]
    totals = fixed["total"].astype(np.int64)
    queue_ids = fixed["queue_id"].astype(np.int64)
    queue_offsets = fixed["queue_offset"].astype(np.int64)
    phys = fixed["phys"].astype(np.int64)
    stamps = fixed["store_ts"].astype(np.int64)
    body_lens = fixed["body_len"].astype(np.int64)
    ok = (body_lens >= 0) & (body_lens <= totals - FIXED_SIZE) & (phys == s + base) \
        & ((fixed["sys_flag"] & (INNER_BATCH_FLAG | _IPV6_HOSTS)) == 0)  # IPv6 hosts move the fields
    topic_at = s + HEADER_SIZE + np.where(ok, body_lens, 0)  # the topic's length byte
    topic_lens = buf[topic_at].astype(np.int64)
    props_at = topic_at + 1 + topic_lens  # the properties' length (2 bytes)
    ok &= props_at + 2 <= s + totals
    props_at = np.where(ok, props_at, s)
    props_lens = (buf[props_at].astype(np.int64) << 8) | buf[props_at + 1]
    ok &= (props_lens < 0x8000) & (FIXED_SIZE + body_lens + topic_lens + props_lens == totals)
    if not ok.all():
        n = int(np.argmin(ok))
        if n < BLOCK_MIN:
            return None
    # topics: one when every record names the first one's, else one per distinct
    # (length, bytes) row
    width = int(topic_lens[:n].max())
    names = buf[np.minimum(topic_at[:n, None] + 1 + np.arange(width), limit - 1)]
    if (topic_lens[:n] == width).all() and (names == names[0]).all():
        which = np.zeros(n, np.int64)
        distinct = [names[0].tobytes()]
    else:
        names[np.arange(width) >= topic_lens[:n, None]] = 0
        rows = np.concatenate([topic_lens[:n, None].astype(np.uint8), names], axis=1)
        unique, which = np.unique(np.ascontiguousarray(rows).view(f"V{width + 1}").ravel(), return_inverse=True)
        which = which.ravel()
        distinct = [raw[1:1 + raw[0]] for raw in (row.tobytes() for row in unique)]
    topic_of: list[str] = []
    for t, name_bytes in enumerate(distinct):
        topic = topic_of_bytes(name_bytes)
        if topic is None:  # the first record of that topic ends the block
            n = min(n, int(np.argmax(which == t)))
        topic_of.append(topic or "")
    if n < BLOCK_MIN:
        return None
    values = _uniq_only(buf, props_at[:n], props_lens[:n])
    if values is None:
        found = _properties(buf, props_at[:n], props_lens[:n])
        if found is None:
            return None
        n, tags, keys, uniq = found
        if n < BLOCK_MIN:
            return None
    code_list = np.zeros(n, np.int64)
    if values is None:
        for r, value in tags.items():
            code = codes.get(value)
            if code is None:
                code = codes[value] = tags_code_of_value(value)
            code_list[r] = code
    entries = np.empty(n, _CQ)
    entries["phys"], entries["size"], entries["code"] = phys[:n], totals[:n], code_list
    ends = phys[:n] + totals[:n]
    out_keys: list[tuple[int, int, int]] = []
    if index_keys and values is not None and len(distinct) == 1:  # one id of one length each
        hashes = key_hashes(prefix(distinct[0]), values, len(values) // n)
        out_keys = list(zip(hashes.tolist(), phys[:n].tolist(), stamps[:n].tolist()))
    elif index_keys:
        if values is not None:
            size = len(values) // n
            tags, keys, uniq = {}, {}, {r: values[r * size:(r + 1) * size] for r in range(n)}
        out_keys = _keys(distinct, which[:n].tolist(), keys, uniq, phys[:n].tolist(), stamps[:n].tolist(),
                         prefix_crcs, prefix)
    # runs: each (topic, queue)'s records in log order, cut where the offsets do not follow
    group = which[:n] << 32 | (queue_ids[:n] & 0xFFFFFFFF)
    order = np.argsort(group, kind="stable")
    g, qo = group[order], queue_offsets[:n][order]
    cut = np.flatnonzero((g[1:] != g[:-1]) | (qo[1:] != qo[:-1] + 1)) + 1
    bounds = np.concatenate(([0], cut, [n])).tolist()
    runs = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        idx = order[a:b]
        r0 = int(idx[0])
        runs.append((topic_of[which[r0]], int(queue_ids[r0]), int(queue_offsets[r0]),
                     entries[idx].tobytes(), int(ends[idx[-1]]), b - a))
    lag = np.clip(now - stamps[:n], 0, lag_buckets - 1)  # the per-record path's buckets
    return Block(n, int(s[n - 1] + totals[n - 1]), int(totals[:n].sum()), runs, out_keys,
                 np.bincount(lag, minlength=lag_buckets))


_UNIQ = np.frombuffer(b"UNIQ_KEY\x01", np.uint8)


def _uniq_only(buf: np.ndarray, props_at: np.ndarray, props_lens: np.ndarray) -> bytes | None:
    """The ids, back to back, when every record's properties are ``UNIQ_KEY\\x01<id>\\x02``
    with ids of one length (a native client's message without tags or keys); else None."""
    size = int(props_lens[0])
    if size < len(_UNIQ) + 2 or not (props_lens == size).all():
        return None
    props = buf[props_at[:, None] + 2 + np.arange(size)]
    ids = props[:, len(_UNIQ):-1]
    if not ((props[:, :len(_UNIQ)] == _UNIQ).all() and (props[:, -1] == 2).all() and (ids != 2).all()):
        return None
    return ids.tobytes()


def _properties(buf: np.ndarray, props_at: np.ndarray, props_lens: np.ndarray
                ) -> tuple[int, dict[int, bytes], dict[int, bytes], dict[int, bytes]] | None:
    """Every record's TAGS, KEYS and UNIQ_KEY values (by record; the last of a name wins,
    as the per-record path reads them) in one pass over all the properties, each behind a
    marker; the records before the first with a DEDUP_KEY (the index builder's rule, one
    by one). None when a property name starts with the marker."""
    n = len(props_at)
    starts_out = np.cumsum(np.append(0, props_lens + 3))
    record_of = np.repeat(np.arange(n), props_lens + 3)
    at = np.arange(int(starts_out[-1])) - starts_out[record_of]  # position in "marker + props"
    cat = buf[np.where(at >= 3, props_at[record_of] + 2 + at - 3, 0)]
    first = starts_out[:-1]
    cat[first], cat[first + 1], cat[first + 2] = 2, 3, 2
    text = cat.tobytes()
    if text.count(b"\x02\x03") != n:
        return None
    tags: dict[int, bytes] = {}
    keys: dict[int, bytes] = {}
    uniq: dict[int, bytes] = {}
    i = -1
    for mark, name, value in _PROPS.findall(text):
        if mark:
            i += 1
        elif name == b"UNIQ_KEY":
            uniq[i] = value
        elif name == b"TAGS":
            tags[i] = value
        elif name == b"KEYS":
            keys[i] = value
        else:  # DEDUP_KEY
            n = i
            break
    if n < len(props_at):
        tags = {r: v for r, v in tags.items() if r < n}
        keys = {r: v for r, v in keys.items() if r < n}
        uniq = {r: v for r, v in uniq.items() if r < n}
    return n, tags, keys, uniq


def _keys(topics: list[bytes], which: list[int], keys: dict[int, bytes], uniq: dict[int, bytes],
          phys: list[int], stamps: list[int], prefix_crcs: dict[bytes, int],
          prefix: Callable[[bytes], bytes]) -> list[tuple[int, int, int]]:
    """(key hash, phys, store timestamp) of every record's KEYS (split on spaces) then its
    UNIQ_KEY, in log order: the per-record path's entries."""
    crcs = []
    for name_bytes in topics:
        c = prefix_crcs.get(name_bytes)
        if c is None:
            c = prefix_crcs[name_bytes] = crc32(prefix(name_bytes))
        crcs.append(c)
    out: list[tuple[int, int, int]] = []
    add_key = out.append
    for r in sorted(keys.keys() | uniq.keys()):
        c, ph, ts = crcs[which[r]], phys[r], stamps[r]
        k = keys.get(r)
        if k:
            for part in k.split(b" "):
                if part:
                    add_key((crc32(part, c) & KEY_HASH_MASK, ph, ts))
        u = uniq.get(r)
        if u:
            add_key((crc32(u, c) & KEY_HASH_MASK, ph, ts))
    return out
