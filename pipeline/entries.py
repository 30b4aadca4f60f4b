"""DataFrame rows (Arrow columns) to RocketMQ MessageBatch entries, the body of a batch send.

The writer's hot path: a run of rows becomes the bytes of their entries with a few Arrow
and numpy calls for the whole run and no Python object per row (a client `Message` per
row cost 27 µs). An entry is `common.batch.message_batch`'s layout: totalSize, magic,
bodyCRC, flag (0, as clients write them), body length, body, properties length (i16),
properties. The properties, in order: the row's `properties` map (null values and the
names the writer sets for that row left out), ``__SHARDINGKEY`` (the `key` column), ``TAGS``,
``KEYS`` (a string, or an array joined by spaces; empty is none), then the writer's
``DEDUP_KEY`` and the producer's ``UNIQ_KEY``. This module only encodes: no I/O, and it
never decides which queue or chunk a row belongs to (writer.py does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketport.common.batch.message_batch import MIN_ENTRY_SIZE
from rocketport.common.message import (
    PROPERTY_DEDUP_KEY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)

from .schema import PROPERTY_KEY

MAX_PROPERTIES = 0x7FFF  # an entry's properties length is an i16
_HEAD = np.dtype([("size", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body", ">i4")])
_PROPS_LEN = np.dtype(">i2")
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)
_EMPTY = pa.scalar(b"", pa.binary())
_PAIR_END = pa.scalar(b"\x02", pa.binary())
_ALWAYS_OURS = pa.array([PROPERTY_DEDUP_KEY.encode(), PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()])


class RowError(ValueError):
    """A row the writer cannot send (an empty value, properties over 32,767 bytes)."""


def _binary(column: pa.Array) -> pa.Array:
    """A string or binary column (any offset width) as binary: UTF-8 bytes, no copy."""
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _present(values: pa.Array) -> np.ndarray:
    """Per row, whether the value is there (not null, not empty)."""
    return pc.fill_null(pc.greater(pc.binary_length(values), 0), False).to_numpy(zero_copy_only=False)


def _pair(name: str, values: pa.Array, present: np.ndarray) -> pa.Array:
    """``name\\x01value\\x02`` per row where `present`, else empty."""
    text = pc.binary_join_element_wise(pa.scalar(name.encode() + b"\x01"), values, _PAIR_END, _EMPTY)
    return pc.if_else(pa.array(present), text, _EMPTY)


def _user_properties(props: pa.MapArray, taken: dict[str, np.ndarray]) -> pa.Array:
    """The map's entries as ``k\\x01v\\x02...`` per row. Left out: null values, DEDUP_KEY
    and UNIQ_KEY (the writer's and the producer's), and a name in `taken` on the rows
    where its column gives it (the column wins, as a Message's own tags and keys do)."""
    if props.null_count:
        props = pc.fill_null(props, pa.scalar([], props.type))
    # a slice of a larger batch keeps its parent's offsets and entries: take its own
    offsets = props.offsets.to_numpy()
    start, stop = int(offsets[0]), int(offsets[-1])
    names = _binary(props.keys.slice(start, stop - start))
    values = _binary(props.items.slice(start, stop - start))
    texts = pc.binary_join_element_wise(names, pa.scalar(b"\x01"), values, _PAIR_END, _EMPTY)
    drop = pc.or_(pc.is_null(texts), pc.is_in(names, _ALWAYS_OURS)).to_numpy(zero_copy_only=False)
    if taken and len(names):
        rows = np.repeat(np.arange(len(props)), np.diff(offsets))
        for name, present in taken.items():
            drop |= pc.equal(names, pa.scalar(name.encode())).to_numpy(zero_copy_only=False) & present[rows]
    texts = pc.if_else(pa.array(drop), _EMPTY, texts)
    grouped = pa.ListArray.from_arrays(pa.array((offsets - start).astype(np.int32)), texts)
    return pc.binary_join(grouped, _EMPTY)


def row_properties(batch: pa.RecordBatch) -> pa.Array | None:
    """Per row, the properties its optional columns give (map, key, tags, keys), encoded;
    None when the batch has none of those columns."""
    parts = []
    taken: dict[str, np.ndarray] = {}
    names = batch.schema.names
    if "key" in names:
        key = _binary(batch.column("key"))  # an empty key is a key: only null is none
        taken[PROPERTY_KEY] = present = ~pc.is_null(key).to_numpy(zero_copy_only=False)
        parts.append(_pair(PROPERTY_KEY, key, present))
    if "tags" in names:
        tags = _binary(batch.column("tags"))
        taken[PROPERTY_TAGS] = present = _present(tags)
        parts.append(_pair(PROPERTY_TAGS, tags, present))
    if "keys" in names:
        keys = batch.column("keys")
        if pa.types.is_list(keys.type) or pa.types.is_large_list(keys.type):
            keys = pc.binary_join(keys, pa.scalar(" ", keys.type.value_type))
        keys = _binary(keys)
        taken[PROPERTY_KEYS] = present = _present(keys)
        parts.append(_pair(PROPERTY_KEYS, keys, present))
    if "properties" in names:
        parts.insert(0, _user_properties(batch.column("properties"), taken))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, _EMPTY)


def id_block(head: str, first: int, count: int) -> pa.Array:
    """``UNIQ_KEY\\x01<id>\\x02`` for `count` client ids ``head + "%04X" % (first + i)``
    (`MessageClientIdGenerator.next_id_run`), built as one fixed-width block."""
    template = np.frombuffer(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01"
                             + head.encode() + b"0000\x02", np.uint8)
    width = len(template)
    block = np.tile(template, (count, 1))
    counters = (first + np.arange(count)) & 0xFFFF
    block[:, width - 5:width - 3] = _HEX[counters >> 8]
    block[:, width - 3:width - 1] = _HEX[counters & 0xFF]
    return pa.Array.from_buffers(pa.binary(), count, [
        None, pa.py_buffer(np.arange(0, width * count + 1, width, dtype=np.int32)), pa.py_buffer(block)])


def dedup_texts(keys: Sequence[str], chunk_of_row: np.ndarray) -> pa.Array:
    """``DEDUP_KEY\\x01<key>\\x02`` per row, where row i belongs to chunk
    ``keys[chunk_of_row[i]]``."""
    texts = pa.array([b"%s\x01%s\x02" % (PROPERTY_DEDUP_KEY.encode(), k.encode()) for k in keys], pa.binary())
    return texts.take(pa.array(chunk_of_row))


def value_lengths(values: pa.Array) -> np.ndarray:
    """Each row's value length; RowError for a null or empty value."""
    lengths = pc.binary_length(values)
    if lengths.null_count or (len(lengths) and pc.min(lengths).as_py() == 0):
        raise RowError("rocketport rows need a non-empty value")
    return lengths.to_numpy()


def encode_entries(values: pa.Array, properties: pa.Array) -> tuple[pa.Buffer, np.ndarray]:
    """The entries of rows with these values and (encoded) properties, back to back, and
    where each entry ends in those bytes."""
    n = len(values)
    values = _binary(values)
    body_len = value_lengths(values)
    props_len = pc.binary_length(properties).to_numpy()
    if n and props_len.max() > MAX_PROPERTIES:
        raise RowError(f"a row's properties exceed {MAX_PROPERTIES} bytes")
    head = np.zeros(n, _HEAD)
    head["size"] = MIN_ENTRY_SIZE + body_len + props_len
    head["body"] = body_len
    heads = pa.Array.from_buffers(pa.binary(), n, [
        None, pa.py_buffer(np.arange(0, 20 * n + 1, 20, dtype=np.int32)), pa.py_buffer(head)])
    plen = pa.Array.from_buffers(pa.binary(), n, [
        None, pa.py_buffer(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), pa.py_buffer(props_len.astype(_PROPS_LEN))])
    entries = pc.binary_join_element_wise(heads, values, plen, properties, _EMPTY)
    _, offsets_buffer, data = entries.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, 4 * entries.offset)
    start = int(offsets[0])
    if data is None:
        return pa.py_buffer(b""), offsets[1:] - start
    return data.slice(start, int(offsets[-1]) - start), offsets[1:] - start
