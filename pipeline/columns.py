"""Pull bodies straight to Arrow columns: the read path's rows without a Python object each.

A pull's body is RocketMQ's message-ext records back to back. Only the walk from one
record to the next is a Python loop (one unpack per record); every field is then gathered
for all records at once with numpy (the fixed head read through one structured dtype,
shifted where a record has IPv6 hosts), bodies and properties are sliced out of the pulled
bytes by Arrow, and the properties strings (``k\\x01v\\x02...``) are split into the map
and the columns taken out of them (tags, keys, the sharding key) by numpy over the
separators' positions, every name compared by its length and first 8 bytes at once. A
compressed body is the one thing inflated record by record (as clients do). This module must never decode a record into a
message object, and never changes the rows' meaning: `schema.RowBuffer` (the offline store
reader's path) yields the same rows for the same records.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketport.common.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
)
from rocketport.core.store.record import MESSAGE_MAGIC_CODE
from rocketport.core.store.record_head import record_head

from .schema import ARROW_SCHEMA, PROPERTY_KEY

_SIZE = struct.Struct(">i")
_BODY_AT = 88  # the body's first byte in an IPv4 record; each IPv6 host adds 12
_PAIR_END = ord(PROPERTY_SEPARATOR)
_NAME_END = ord(NAME_VALUE_SEPARATOR)
_NO_STRINGS = pa.array([], pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)


class RecordFormatError(ValueError):
    """A pull body that is not well-formed records."""


def record_starts(body: bytes) -> np.ndarray:
    """Where each record of `body` starts (the one per-record Python loop: a size read and
    a step; the magic codes are checked for every record at once after it)."""
    starts = []
    append = starts.append
    unpack = _SIZE.unpack_from
    pos, end = 0, len(body)
    try:
        while pos < end:
            size = unpack(body, pos)[0]
            if size < _BODY_AT:
                raise RecordFormatError(f"record at {pos}: size {size}")
            append(pos)
            pos += size
    except struct.error:
        raise RecordFormatError(f"record at {pos} is truncated") from None
    if pos != end:
        raise RecordFormatError(f"record at {starts[-1]} runs past the pulled bytes")
    at = np.array(starts, np.int64)
    if len(at):
        raw = np.frombuffer(body, np.uint8)
        bad = np.flatnonzero(_be(raw, at + 4, 4) != MESSAGE_MAGIC_CODE)
        if len(bad):
            magic = int(_be(raw, at[bad[:1]] + 4, 4)[0])
            raise RecordFormatError(f"record at {at[bad[0]]}: magic {magic & 0xFFFFFFFF:#x}")
    return at


def _be(raw: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian signed integers of `width` bytes at each position, as int64."""
    cells = raw[at[:, None] + np.arange(width)]
    return cells.view(f">i{width}").reshape(-1).astype(np.int64)


def _slices(buffer: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, kind: pa.DataType) -> pa.Array:
    """The byte ranges of `buffer` as one binary/string array (Arrow copies them in C++):
    ranges and the gaps between them make one array over the whole buffer, then every
    other element is taken."""
    n = len(starts)
    if n == 0:
        return pa.array([], kind)
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = starts + lengths
    whole = pa.Array.from_buffers(kind, 2 * n - 1, [None, pa.py_buffer(bounds), buffer])
    return whole.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int32)))


def _rows_of(lists: pa.ListArray) -> np.ndarray:
    """For each element of ``lists.flatten()``, the index of its list."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    return np.repeat(np.arange(len(lists)), lengths)


def _regroup(n: int, rows: np.ndarray) -> np.ndarray:
    """Offsets of `n` lists whose elements belong to lists rows[0], rows[1], ... (ascending)."""
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    return offsets


def _strings(buffer: pa.Buffer, starts: np.ndarray, lengths: np.ndarray,
             present: np.ndarray | None = None) -> pa.Array:
    """`_slices` as strings, null where `present` is False."""
    if present is None or present.all():
        return _slices(buffer, starts, lengths, pa.string())
    n = len(starts)
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = np.where(present, starts, 0)
    bounds[1::2] = np.where(present, starts + lengths, 0)
    bounds[1::2] = np.maximum(bounds[1::2], bounds[0::2])
    ordered = np.maximum.accumulate(bounds)  # offsets must not fall back: absent rows take none
    whole = pa.Array.from_buffers(pa.string(), 2 * n - 1, [None, pa.py_buffer(ordered), buffer])
    even = np.arange(0, 2 * n - 1, 2, dtype=np.int32)
    return whole.take(pa.array(even, mask=~present))


def _name_is(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, prefixes: np.ndarray,
             name: bytes) -> np.ndarray:
    """Per pair, whether its name is `name`: its length and first 8 bytes (`prefixes`, as
    little-endian integers) compared, and any further bytes where those match."""
    head = name[:8]
    mask = (1 << (8 * len(head))) - 1
    out = (lengths == len(name)) & ((prefixes & np.uint64(mask)) == np.uint64(int.from_bytes(head, "little")))
    if len(name) > 8:
        candidates = np.flatnonzero(out)
        if len(candidates):
            cells = data[starts[candidates, None] + np.arange(8, len(name))]
            out[candidates] = (cells == np.frombuffer(name[8:], np.uint8)).all(axis=1)
    return out


def _pairs(row_at: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row, start, name end, end) of every name/value pair in the rows' properties text: a
    pair ends at a \\x02 or its row's end, its name at its first \\x01; a piece without
    one (as the empty one after a row's last \\x02) is no pair."""
    ends = np.flatnonzero(data == _PAIR_END)
    seps = np.flatnonzero(data == _NAME_END)
    n = len(row_at) - 1
    filled = row_at[1:] > row_at[:-1]
    closed = not filled.any() or bool((data[row_at[1:][filled] - 1] == _PAIR_END).all())
    if closed and len(seps) == len(ends) and (len(ends) == 0 or (
            (seps < ends).all() and (seps[1:] > ends[:-1]).all())):
        # what writers write: every pair closed by its \x02, with one \x01 in it
        starts = np.empty_like(ends)
        starts[:1] = 0
        starts[1:] = ends[:-1] + 1
        rows = np.repeat(np.arange(n), np.diff(np.searchsorted(ends, row_at)))
        return rows, starts, seps, ends
    rows = np.searchsorted(row_at, ends, "right") - 1
    open_rows = np.flatnonzero(filled)
    open_rows = open_rows[data[row_at[open_rows + 1] - 1] != _PAIR_END]
    if len(open_rows):  # a last pair without its \x02 ends with its row
        ends = np.concatenate([ends, row_at[open_rows + 1]])
        rows = np.concatenate([rows, open_rows])
        order = np.lexsort((ends, rows))
        ends, rows = ends[order], rows[order]
    starts = np.empty_like(ends)
    if len(ends):
        starts[0] = row_at[rows[0]]
        starts[1:] = np.where(rows[1:] == rows[:-1], ends[:-1] + 1, row_at[rows[1:]])
    first = np.searchsorted(seps, starts)
    name_end = seps[np.minimum(first, len(seps) - 1)] if len(seps) else starts
    whole = (first < len(seps)) & (name_end < ends)
    return rows[whole], starts[whole], name_end[whole], ends[whole]


def _properties(n: int, text: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]:
    """(properties map without the taken keys, tags, keys, sharding key, unique id) from
    the properties strings (``k\\x01v\\x02...``, offsets from 0), split by numpy over the
    separators' positions (`_pairs`). Where a name comes twice in a row, the last is taken."""
    _, offsets_buffer, data_buffer = text.buffers()
    row_at = np.frombuffer(offsets_buffer, np.int32, n + 1).astype(np.int64)
    data_buffer = data_buffer if data_buffer is not None else pa.py_buffer(b"")
    data = np.frombuffer(data_buffer, np.uint8, int(row_at[-1]))
    rows, starts, name_end, ends = _pairs(row_at, data)
    name_len = name_end - starts
    value_at = name_end + 1
    value_len = ends - value_at
    padded = np.concatenate([data, np.zeros(8, np.uint8)])  # every pair has 8 bytes to read
    prefixes = np.lib.stride_tricks.sliding_window_view(padded, 8)[starts].view("<u8").reshape(-1)
    one_each = np.arange(n)

    def pick(name: str) -> tuple[pa.Array, np.ndarray]:
        hit = _name_is(data, starts, name_len, prefixes, name.encode())
        found = np.flatnonzero(hit)
        if len(found) == 0:
            return pa.nulls(n, pa.string()), hit
        if len(found) == n and (rows[found] == one_each).all():  # once in every row
            return _slices(data_buffer, value_at[found], value_len[found], pa.string()), hit
        index = np.full(n, -1, np.int64)
        index[rows[found]] = found
        present = index >= 0
        safe = np.where(present, index, 0)
        return _strings(data_buffer, value_at[safe], value_len[safe], present), hit

    tags, is_tags = pick(PROPERTY_TAGS)
    keys, is_keys = pick(PROPERTY_KEYS)
    key, is_key = pick(PROPERTY_KEY)
    uniq, _ = pick(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    kept = np.flatnonzero(~(is_tags | is_keys | is_key))
    if len(kept) == 0:
        return (pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), _NO_STRINGS, _NO_STRINGS),
                tags, keys, key, uniq)
    props = pa.MapArray.from_arrays(
        pa.array(_regroup(n, rows[kept])),
        _slices(data_buffer, starts[kept], name_len[kept], pa.string()),
        _slices(data_buffer, value_at[kept], value_len[kept], pa.string()))
    return props, tags, keys, key, uniq


def _key_lists(n: int, keys: pa.Array) -> pa.Array:
    """KEYS split on spaces, empty items dropped; a message without KEYS has []."""
    if keys.null_count == n:
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), _NO_STRINGS)
    split = pc.split_pattern(pc.fill_null(keys, ""), KEY_SEPARATOR)
    items = split.flatten()
    keep = pc.not_equal(items, "").to_numpy(zero_copy_only=False)
    return pa.ListArray.from_arrays(pa.array(_regroup(n, _rows_of(split)[keep])),
                                    items.filter(pa.array(keep)))


def _offset_ids(raw: np.ndarray, host_at: np.ndarray, phys_at: np.ndarray) -> pa.Array:
    """RocketMQ's offset message ids of IPv4 records: hex of store host + CommitLog offset."""
    cells = np.concatenate([raw[host_at[:, None] + np.arange(8)], raw[phys_at[:, None] + np.arange(8)]], axis=1)
    text = _HEX[cells].reshape(len(host_at), 32)
    return pa.Array.from_buffers(pa.string(), len(host_at), [
        None, pa.py_buffer(np.arange(0, 32 * len(host_at) + 1, 32, dtype=np.int32)), pa.py_buffer(text.tobytes())])


def to_batch(body: bytes, topic: str, queue_id: int, end: int,
             tags: frozenset[str] | None = None) -> pa.RecordBatch:
    """The records of `body` (one queue's pulls, joined) with a queue offset below `end`
    and, when `tags` is given, one of those tags, as a RecordBatch of `schema.ARROW_SCHEMA`."""
    at = record_starts(body)
    n = len(at)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
    raw = np.frombuffer(body, np.uint8)
    buffer = pa.py_buffer(body)
    # every record's first 88 bytes, one row each: IPv4 records' fixed fields are columns
    head = np.lib.stride_tricks.sliding_window_view(raw, _BODY_AT)[at].view(record_head()).reshape(-1)
    flags = head["sys_flag"]
    born6 = np.where(flags & BORNHOST_V6_FLAG, 12, 0)
    shift = born6 + np.where(flags & STOREHOSTADDRESS_V6_FLAG, 12, 0)
    v4 = not shift.any()
    try:
        store_ts = head["store_ts"] if v4 else _be(raw, at + 56 + born6, 8)
        reconsume = head["reconsume"] if v4 else _be(raw, at + 72 + shift, 4)
        body_len = head["body_len"].astype(np.int64) if v4 else _be(raw, at + 84 + shift, 4)
        body_at = at + _BODY_AT + shift
        topic_at = body_at + body_len
        props_len_at = topic_at + 1 + raw[topic_at]
        props_len = (raw[props_len_at].astype(np.int64) << 8) | raw[props_len_at + 1]
    except IndexError:
        raise RecordFormatError("a record's lengths point past the pulled bytes") from None
    if np.any(props_len_at + 2 + props_len != at + head["total"]):
        raise RecordFormatError("a record's lengths do not add up to its size")

    compressed = np.flatnonzero(flags & COMPRESSED_FLAG)
    if len(compressed):
        values = [body[s:s + ln] for s, ln in zip(body_at.tolist(), body_len.tolist())]
        for i in compressed.tolist():
            values[i] = zlib.decompress(values[i])
        value = pa.array(values, pa.binary())
    else:
        value = _slices(buffer, body_at, body_len, pa.binary())
    props, tag, keys, key, uniq = _properties(n, _slices(buffer, props_len_at + 2, props_len, pa.string()))
    msg_id = uniq
    if uniq.null_count:  # no producer id: RocketMQ's offset message id
        if v4:
            offset_ids = _offset_ids(raw, at + 64, at + 28)
        else:
            offset_ids = pa.array([_offset_id(raw, a, b6, s) for a, b6, s in
                                   zip(at.tolist(), born6.tolist(), shift.tolist())], pa.string())
        msg_id = pc.coalesce(uniq, offset_ids)
    offsets = head["queue_offset"].astype(np.int64)
    batch = pa.RecordBatch.from_arrays([
        _repeated(topic, n),
        pa.array(np.full(n, queue_id, np.int32)),
        pa.array(offsets),
        key, value, tag, _key_lists(n, keys), props,
        pa.array(head["born_ts"].astype(np.int64) * 1000, _TIMESTAMP),
        pa.array(store_ts.astype(np.int64) * 1000, _TIMESTAMP),
        msg_id,
        pa.array(reconsume.astype(np.int32)),
    ], schema=ARROW_SCHEMA)
    if tags is None:
        if n == 0 or offsets.max() < end:
            return batch
        return batch.filter(pa.array(offsets < end))
    keep = pc.and_(pa.array(offsets < end),
                   pc.fill_null(pc.is_in(tag, pa.array(sorted(tags), pa.string())), False))
    return batch if pc.all(keep).as_py() else batch.filter(keep)


def _repeated(text: str, n: int) -> pa.Array:
    """`text` `n` times, as one string array."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])



def _offset_id(raw: np.ndarray, at: int, born6: int, shift: int) -> str:
    """One record's offset message id (store host of 8 bytes, or 20 for IPv6)."""
    host = at + 64 + born6
    return (raw[host:host + 8 + shift - born6].tobytes() + raw[at + 28:at + 36].tobytes()).hex().upper()
