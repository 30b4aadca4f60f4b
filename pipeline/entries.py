"""DataFrame rows (Arrow columns) to the records of a record batch stored whole.

The writer's hot path: a run of rows becomes the bytes of their records with a few Arrow
and numpy calls for the whole run and no Python object per row (a client `Message` per
row cost 27 µs). A chunk of rows is sent as one record batch (Kafka's v2 layout,
`common.batch.record_batch`) that the broker stores as one inner batch, each record its
own message with its own offset for every reader; `core.batch.messages` maps a record to
that message: its key is the message's KEYS, its headers its properties. So a row's record
is: the `keys` column (a string, or an array joined by spaces; empty is none) as the key,
the `value` column as the value, and as headers, in order: the row's `properties` map
(null values and the names the writer sets for that row left out), ``__SHARDINGKEY`` (the
`key` column), ``TAGS``, then the producer's ``UNIQ_KEY``. The chunk's ``DEDUP_KEY`` is the
batch's, not a record's (the send carries it). This module only encodes: no I/O, and it
never decides which queue or chunk a row belongs to (writer.py does).
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketport.common.message import (
    PROPERTY_DEDUP_KEY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)

from .schema import PROPERTY_KEY

# the record batch header (common.batch.record_batch.HEADER) cut at its CRC: baseOffset,
# batchLength, partitionLeaderEpoch, magic | crc | attributes .. recordsCount (what the CRC covers)
_HEAD = struct.Struct(">qiib")
_CRC = struct.Struct(">I")
_COVERED = struct.Struct(">hiqqqhii")
_AFTER_LENGTH = 49  # header bytes counted in batchLength (61 less baseOffset and batchLength)
_EMPTY = pa.scalar(b"", pa.binary())
_NO_KEY = pa.scalar(b"\x01", pa.binary())  # a null key: length -1 as a zigzag varint
_RECORD_HEAD = pa.scalar(b"\x00\x00", pa.binary())  # attributes 0, timestampDelta 0
_ALWAYS_OURS = pa.array([PROPERTY_DEDUP_KEY.encode(), PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()])
_SHIFTS = np.arange(5, dtype=np.uint64) * np.uint64(7)
_LIMITS = np.array([1 << 7, 1 << 14, 1 << 21, 1 << 28], np.uint64)
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)


class RowError(ValueError):
    """A row the writer cannot send (an empty value)."""


def _binary(column: pa.Array) -> pa.Array:
    """A string or binary column (any offset width) as binary: UTF-8 bytes, no copy."""
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _present(values: pa.Array) -> np.ndarray:
    """Per row, whether the value is there (not null, not empty)."""
    return pc.fill_null(pc.greater(pc.binary_length(values), 0), False).to_numpy(zero_copy_only=False)


def varints(values: np.ndarray) -> pa.Array:
    """Each of `values` (0 <= v < 2**34) as a zigzag varint, Kafka's record encoding."""
    if len(values) and int(values.max()) < _TABLED:  # deltas, counts, lengths under 8 KiB
        return _TABLE.take(pa.array(values, pa.int32()))
    return _varints(values)


def _varints(values: np.ndarray) -> pa.Array:
    zz = values.astype(np.uint64) << np.uint64(1)
    n = len(zz)
    width = 1 + (zz[:, None] >= _LIMITS).sum(axis=1)
    cells = ((zz[:, None] >> _SHIFTS) & np.uint64(0x7F)).astype(np.uint8)
    column = np.arange(5)
    cells[column < (width - 1)[:, None]] |= 0x80
    data = cells[column < width[:, None]]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(width, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_TABLED = 1 << 13  # the values whose varints `varints` takes from a table (up to two bytes)
_TABLE = _varints(np.arange(_TABLED))


def _sized(values: pa.Array) -> pa.Array:
    """varint(length) + bytes, per row (nulls stay null)."""
    lengths = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
    return pc.binary_join_element_wise(varints(lengths), values, _EMPTY)


def _name(name: str) -> pa.Scalar:
    encoded = name.encode()
    return pa.scalar(bytes(varints(np.array([len(encoded)]))[0].as_py()) + encoded, pa.binary())


def _header(name: str, values: pa.Array, present: np.ndarray) -> pa.Array:
    """The header ``name: value`` per row where `present`, else empty."""
    text = pc.binary_join_element_wise(_name(name), _sized(values), _EMPTY)
    return pc.if_else(pa.array(present), text, _EMPTY)


def _user_headers(props: pa.MapArray, taken: dict[str, np.ndarray]) -> tuple[pa.Array, np.ndarray]:
    """The map's entries as headers per row, and how many each row has. Left out: null
    values, DEDUP_KEY and UNIQ_KEY (the writer's and the producer's), and a name in `taken`
    on the rows where its column gives it (the column wins, as a Message's own tags and
    keys do)."""
    if props.null_count:
        props = pc.fill_null(props, pa.scalar([], props.type))
    # a slice of a larger batch keeps its parent's offsets and entries: take its own
    offsets = props.offsets.to_numpy()
    start, stop = int(offsets[0]), int(offsets[-1])
    names = _binary(props.keys.slice(start, stop - start))
    values = _binary(props.items.slice(start, stop - start))
    texts = pc.binary_join_element_wise(_sized(names), _sized(values), _EMPTY)
    drop = pc.or_(pc.is_null(texts), pc.is_in(names, _ALWAYS_OURS)).to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(len(props)), np.diff(offsets))
    for name, present in taken.items():
        drop |= pc.equal(names, pa.scalar(name.encode())).to_numpy(zero_copy_only=False) & present[rows]
    texts = pc.if_else(pa.array(drop), _EMPTY, texts)
    grouped = pa.ListArray.from_arrays(pa.array((offsets - start).astype(np.int32)), texts)
    return pc.binary_join(grouped, _EMPTY), np.bincount(rows[~drop], minlength=len(props))


def row_fields(batch: pa.RecordBatch) -> tuple[pa.Array | None, pa.Array | None, np.ndarray]:
    """Per row, what its optional columns give: the record key (the `keys` column), the
    headers of the map, the sharding key and the tags, encoded, and how many headers;
    None for a part no column gives."""
    n = batch.num_rows
    names = batch.schema.names
    parts = []
    counts = np.zeros(n, np.int64)
    taken: dict[str, np.ndarray] = {}
    record_key = None
    if "keys" in names:
        keys = batch.column("keys")
        if pa.types.is_list(keys.type) or pa.types.is_large_list(keys.type):
            keys = pc.binary_join(keys, pa.scalar(" ", keys.type.value_type))
        keys = _binary(keys)
        taken[PROPERTY_KEYS] = present = _present(keys)
        if present.any():
            record_key = pc.if_else(pa.array(present), _sized(keys), _NO_KEY)
    if "key" in names:
        key = _binary(batch.column("key"))  # an empty key is a key: only null is none
        taken[PROPERTY_KEY] = present = ~pc.is_null(key).to_numpy(zero_copy_only=False)
        parts.append(_header(PROPERTY_KEY, key, present))
        counts += present
    if "tags" in names:
        tags = _binary(batch.column("tags"))
        taken[PROPERTY_TAGS] = present = _present(tags)
        parts.append(_header(PROPERTY_TAGS, tags, present))
        counts += present
    if "properties" in names:
        headers, per_row = _user_headers(batch.column("properties"), taken)
        parts.insert(0, headers)
        counts += per_row
    headers = None
    if len(parts) == 1:
        headers = parts[0]
    elif parts:
        headers = pc.binary_join_element_wise(*parts, _EMPTY)
    return record_key, headers, counts


def id_headers(head: str, first: int, count: int) -> pa.Array:
    """The ``UNIQ_KEY`` header for `count` client ids ``head + "%04X" % (first + i)``
    (`MessageClientIdGenerator.next_id_run`), built as one fixed-width block."""
    name = _name(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX).as_py()
    size = bytes(varints(np.array([len(head) + 4]))[0].as_py())
    template = np.frombuffer(name + size + head.encode() + b"0000", np.uint8)
    width = len(template)
    block = np.tile(template, (count, 1))
    counters = (first + np.arange(count)) & 0xFFFF
    block[:, width - 4:width - 2] = _HEX[counters >> 8]
    block[:, width - 2:] = _HEX[counters & 0xFF]
    return pa.Array.from_buffers(pa.binary(), count, [
        None, pa.py_buffer(np.arange(0, width * count + 1, width, dtype=np.int32)), pa.py_buffer(block)])


def value_lengths(values: pa.Array) -> np.ndarray:
    """Each row's value length; RowError for a null or empty value."""
    lengths = pc.binary_length(values)
    if lengths.null_count or (len(lengths) and pc.min(lengths).as_py() == 0):
        raise RowError("rocketport rows need a non-empty value")
    return lengths.to_numpy()


def encode_records(values: pa.Array, offset_deltas: np.ndarray, record_key: pa.Array | None,
                   headers: pa.Array | None, header_counts: np.ndarray) -> tuple[pa.Buffer, np.ndarray]:
    """The records of rows with these values, offset deltas (each row's place in its
    batch), keys and headers (encoded; `record_key` None: no row has one), back to back,
    and where each record ends in those bytes."""
    n = len(values)
    values = _binary(values)
    body = pc.binary_join_element_wise(
        _RECORD_HEAD, varints(offset_deltas), record_key if record_key is not None else _NO_KEY,
        varints(value_lengths(values)), values, varints(header_counts),
        headers if headers is not None else _EMPTY, _EMPTY)
    records = pc.binary_join_element_wise(varints(pc.binary_length(body).to_numpy()), body, _EMPTY)
    _, offsets_buffer, data = records.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, 4 * records.offset)
    start = int(offsets[0])
    if data is None:
        return pa.py_buffer(b""), offsets[1:] - start
    return data.slice(start, int(offsets[-1]) - start), offsets[1:] - start


def record_batch(parts: list[memoryview], count: int, timestamp_ms: int) -> bytes:
    """The record batch of `count` records (`encode_records`' bytes, in parts), their
    timestamps `timestamp_ms`: no producer id, uncompressed, its CRC32C computed."""
    covered = _COVERED.pack(0, count - 1, timestamp_ms, timestamp_ms, -1, -1, -1, count)
    crc = crc32c.crc32c(covered)
    size = 0
    for part in parts:
        crc = crc32c.crc32c(part, crc)
        size += len(part)
    return b"".join([_HEAD.pack(0, _AFTER_LENGTH + size, -1, 2), _CRC.pack(crc), covered, *parts])
