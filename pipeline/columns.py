"""Pull bodies straight to Arrow columns: the read path's rows without a Python object each.

A pull's body is RocketMQ's message-ext records back to back. Only the walk from one
record to the next is a Python loop (one unpack per record); every field is then gathered
for all records at once with numpy (fixed-offset integers, shifted where a record has IPv6
hosts), bodies and properties are sliced out of the pulled bytes by Arrow, and the
properties string (``k\\x01v\\x02...``) is split into the map and the columns taken out of
it (tags, keys, the sharding key) by Arrow compute. A compressed body is the one thing
inflated record by record (as clients do). This module must never decode a record into a
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

from .schema import ARROW_SCHEMA, PROPERTY_KEY

_SIZE_MAGIC = struct.Struct(">ii")
_BODY_AT = 88  # the body's first byte in an IPv4 record; each IPv6 host adds 12
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)


class RecordFormatError(ValueError):
    """A pull body that is not well-formed records."""


def record_starts(body: bytes) -> np.ndarray:
    """Where each record of `body` starts (the one per-record Python loop)."""
    starts = []
    append = starts.append
    unpack = _SIZE_MAGIC.unpack_from
    pos, end = 0, len(body)
    try:
        while pos < end:
            size, magic = unpack(body, pos)
            if magic != MESSAGE_MAGIC_CODE or size < _BODY_AT or pos + size > end:
                raise RecordFormatError(f"record at {pos}: size {size}, magic {magic & 0xFFFFFFFF:#x}")
            append(pos)
            pos += size
    except struct.error:
        raise RecordFormatError(f"record at {pos} is truncated") from None
    return np.array(starts, np.int64)


def _be(raw: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian signed integers of `width` bytes at each position, as int64."""
    cells = raw[at[:, None] + np.arange(width)]
    return cells.view(f">i{width}").reshape(-1).astype(np.int64)


def _field(head: np.ndarray, start: int, width: int) -> np.ndarray:
    """A big-endian integer field of every record from their fixed heads, as int64."""
    return np.ascontiguousarray(head[:, start:start + width]).view(f">i{width}").reshape(-1).astype(np.int64)


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


def _mask(condition: pa.Array) -> np.ndarray:
    return condition.to_numpy(zero_copy_only=False)


def _regroup(n: int, rows: np.ndarray) -> np.ndarray:
    """Offsets of `n` lists whose elements belong to lists rows[0], rows[1], ... (ascending)."""
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    return offsets


def _pick(n: int, rows: np.ndarray, hit: np.ndarray, values: pa.Array) -> pa.Array:
    """Per row, the value of the element where `hit` is true (null where none is)."""
    index = np.full(n, -1, np.int64)
    index[rows[hit]] = np.flatnonzero(hit)
    return values.take(pa.array(index, mask=index < 0))


def _properties(n: int, text: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]:
    """(properties map without the taken keys, tags, keys, sharding key, unique id)."""
    pairs = pc.split_pattern(text, PROPERTY_SEPARATOR)
    rows = _rows_of(pairs)
    kv = pc.split_pattern(pairs.flatten(), NAME_VALUE_SEPARATOR, max_splits=1)
    whole = _mask(pc.equal(pc.list_value_length(kv), 2))  # not the "" after the last pair
    rows, kv = rows[whole], kv.filter(pa.array(whole))
    names, values = pc.list_element(kv, 0), pc.list_element(kv, 1)
    is_tags = _mask(pc.equal(names, PROPERTY_TAGS))
    is_keys = _mask(pc.equal(names, PROPERTY_KEYS))
    is_key = _mask(pc.equal(names, PROPERTY_KEY))
    is_uniq = _mask(pc.equal(names, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
    rest = ~(is_tags | is_keys | is_key)
    mask = pa.array(rest)
    props = pa.MapArray.from_arrays(pa.array(_regroup(n, rows[rest])), names.filter(mask),
                                    values.filter(mask))
    return (props, _pick(n, rows, is_tags, values), _pick(n, rows, is_keys, values),
            _pick(n, rows, is_key, values), _pick(n, rows, is_uniq, values))


def _key_lists(n: int, keys: pa.Array) -> pa.Array:
    """KEYS split on spaces, empty items dropped; a message without KEYS has []."""
    split = pc.split_pattern(pc.fill_null(keys, ""), KEY_SEPARATOR)
    items = split.flatten()
    keep = _mask(pc.not_equal(items, ""))
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
    raw = np.frombuffer(body, np.uint8)
    buffer = pa.py_buffer(body)
    # every record's first 88 bytes, one row each: IPv4 records' fixed fields are columns
    head = np.lib.stride_tricks.sliding_window_view(raw, _BODY_AT)[at]
    flags = _field(head, 36, 4)
    born6 = np.where(flags & BORNHOST_V6_FLAG, 12, 0)
    shift = born6 + np.where(flags & STOREHOSTADDRESS_V6_FLAG, 12, 0)
    v4 = not shift.any()
    try:
        store_ts = _field(head, 56, 8) if v4 else _be(raw, at + 56 + born6, 8)
        reconsume = _field(head, 72, 4) if v4 else _be(raw, at + 72 + shift, 4)
        body_len = _field(head, 84, 4) if v4 else _be(raw, at + 84 + shift, 4)
        body_at = at + _BODY_AT + shift
        topic_at = body_at + body_len
        props_len_at = topic_at + 1 + raw[topic_at]
        props_len = (raw[props_len_at].astype(np.int64) << 8) | raw[props_len_at + 1]
    except IndexError:
        raise RecordFormatError("a record's lengths point past the pulled bytes") from None
    if np.any(props_len_at + 2 + props_len != at + _field(head, 0, 4)):
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
    ts = pa.timestamp("us", tz="UTC")
    batch = pa.RecordBatch.from_arrays([
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([topic])).dictionary_decode(),
        pa.array(np.full(n, queue_id, np.int32)),
        pa.array(_field(head, 20, 8)),
        key, value, tag, _key_lists(n, keys), props,
        pa.array(_field(head, 40, 8) * 1000, ts),
        pa.array(store_ts * 1000, ts),
        msg_id,
        pa.array(reconsume.astype(np.int32)),
    ], schema=ARROW_SCHEMA)
    keep = pc.less(batch.column(2), end)
    if tags is not None:
        keep = pc.and_(keep, pc.fill_null(pc.is_in(tag, pa.array(sorted(tags), pa.string())), False))
    return batch if pc.all(keep).as_py() else batch.filter(keep)


def _offset_id(raw: np.ndarray, at: int, born6: int, shift: int) -> str:
    """One record's offset message id (store host of 8 bytes, or 20 for IPv6)."""
    host = at + 64 + born6
    return (raw[host:host + 8 + shift - born6].tobytes() + raw[at + 28:at + 36].tobytes()).hex().upper()
