"""Kafka record batch v2 (magic 2): the store's inner-batch format.

A Kafka producer's batch is stored whole, as one CommitLog entry that the ConsumeQueue
indexes as many logical offsets; the broker assigns offsets by rewriting ``baseOffset``,
which the CRC does not cover, so it never recompresses nor recomputes the CRC on the produce
path. This module reads the header, checks the CRC, splits a Produce ``records`` field into
batches, decodes records (decompressing when needed) for the paths that need per-message
content, and builds batches (remoting messages served to Kafka consumers, tests, benches).

Layout (big-endian): baseOffset i64, batchLength i32 (bytes after this field),
partitionLeaderEpoch i32, magic i8, crc u32 (CRC32C of attributes..end), attributes i16,
lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16,
baseSequence i32, recordsCount i32, then records as zigzag varints.

This module must never import a protocol package; errors are :class:`CorruptBatch`, which
each front-end maps to its own error code.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

import crc32c as _crc32c

from .compression import CompressionError, compress, decompress

__all__ = [
    "HEADER",
    "HEADER_SIZE",
    "MAGIC",
    "ATTR_COMPRESSION_MASK",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "BatchHeader",
    "CorruptBatch",
    "Record",
    "batch_payload",
    "build_batch",
    "iter_payload_records",
    "iter_records",
    "keyless_header_values",
    "parse_header",
    "record_keys",
    "set_base_offset",
    "split_batches",
    "verify_crc",
]

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
MAGIC: Final = 2

# Offsets of single fields inside the header.
_LENGTH_OFFSET: Final = 8
_MAGIC_OFFSET: Final = 16
_CRC_OFFSET: Final = 17
_CRC_START: Final = 21  # attributes: the CRC covers from here to the end of the batch
_LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: bytes not counted in batchLength

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08  # set: LogAppendTime
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20

_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_U32: Final = struct.Struct(">I")
_LEN_MAGIC: Final = struct.Struct(">iib")  # batchLength, partitionLeaderEpoch, magic

Buffer = bytes | bytearray | memoryview


class CorruptBatch(ValueError):
    """A batch whose framing, magic, CRC, compression or records do not hold together."""


@dataclass(slots=True)
class BatchHeader:
    """The 61-byte batch header, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, including baseOffset and batchLength."""
        return self.batch_length + _LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


@dataclass(slots=True)
class Record:
    """One record of a batch; offsets and timestamps are deltas from the batch header."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header at ``pos``; only magic 2 is accepted (every client here sends it)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatch(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptBatch(f"unsupported record batch magic {header.magic}")
    if header.batch_length < HEADER_SIZE - _LOG_OVERHEAD:
        raise CorruptBatch(f"batch length {header.batch_length} shorter than its header")
    return header


def verify_crc(buf: Buffer, pos: int = 0) -> bool:
    """True when the stored CRC32C matches attributes..end of the batch at ``pos``."""
    view = memoryview(buf)
    if len(view) - pos < HEADER_SIZE:
        return False
    batch_length, _, _ = _LEN_MAGIC.unpack_from(view, pos + _LENGTH_OFFSET)
    end = pos + _LOG_OVERHEAD + batch_length
    if batch_length < HEADER_SIZE - _LOG_OVERHEAD or end > len(view):
        return False
    (stored,) = _U32.unpack_from(view, pos + _CRC_OFFSET)
    return _crc32c.crc32c(view[pos + _CRC_START : end]) == stored


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets in place; the CRC stays valid since it skips baseOffset."""
    _I64.pack_into(buf, pos, base_offset)


def split_batches(buf: Buffer) -> list[tuple[int, int]]:
    """(position, size) of each batch in a Produce ``records`` field; a partial tail is corrupt."""
    view = memoryview(buf)
    end = len(view)
    out: list[tuple[int, int]] = []
    pos = 0
    min_length = HEADER_SIZE - _LOG_OVERHEAD
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptBatch(f"{end - pos} trailing bytes at {pos} do not hold a batch header")
        batch_length, _, magic = _LEN_MAGIC.unpack_from(view, pos + _LENGTH_OFFSET)
        if magic != MAGIC:
            raise CorruptBatch(f"unsupported record batch magic {magic} at {pos}")
        size = batch_length + _LOG_OVERHEAD
        if batch_length < min_length or pos + size > end:
            raise CorruptBatch(f"batch at {pos} claims {batch_length} bytes, {end - pos - 12} left")
        out.append((pos, size))
        pos += size
    return out


# --- records -------------------------------------------------------------------------------


def _read_varint(data: Buffer, pos: int) -> tuple[int, int]:
    """Zigzag varint (up to 64 bits) at ``pos``; returns (value, next position)."""
    shift = 0
    result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatch("varint longer than 10 bytes")


def batch_payload(batch: Buffer) -> tuple[int, bytes]:
    """(records count, records payload) of one batch, decompressed when needed: a copy
    either way, so callers may keep it after the buffer is gone. Checks framing like
    parse_header, without building a BatchHeader (the index builder calls it per batch)."""
    view = memoryview(batch)
    if len(view) < HEADER_SIZE:
        raise CorruptBatch(f"batch header needs {HEADER_SIZE} bytes, {len(view)} left")
    batch_length, _, magic = _LEN_MAGIC.unpack_from(view, _LENGTH_OFFSET)
    if magic != MAGIC:
        raise CorruptBatch(f"unsupported record batch magic {magic}")
    end = batch_length + _LOG_OVERHEAD
    if batch_length < HEADER_SIZE - _LOG_OVERHEAD or end > len(view):
        raise CorruptBatch(f"batch claims {end} bytes, buffer holds {len(view)}")
    (attributes,) = _I16.unpack_from(view, _CRC_START)
    (count,) = _I32.unpack_from(view, HEADER_SIZE - 4)
    payload = view[HEADER_SIZE:end]
    codec = attributes & ATTR_COMPRESSION_MASK
    if not codec:
        return count, bytes(payload)
    try:
        return count, decompress(codec, payload)
    except CompressionError as exc:
        raise CorruptBatch(str(exc)) from exc


def iter_records(batch: Buffer) -> Iterator[Record]:
    """Decode the records of one batch, decompressing its payload first when needed."""
    count, data = batch_payload(batch)
    return _decode_records(data, count)


def iter_payload_records(data: bytes, count: int) -> Iterator[Record]:
    """Decode ``count`` records of a payload already decompressed: a caller that had to look
    inside it (record_tags) does not pay for decompression twice."""
    return _decode_records(data, count)


def record_keys(data: bytes, pos: int, count: int) -> tuple[list[bytes], int]:
    """The non-empty keys of ``count`` records at ``pos`` of a records payload, and the
    position after them.

    Reads only each record's length and key (no Record, value or headers), for the index
    builder: ~4x cheaper per record than iter_records. The batch's CRC was checked when it
    was stored, so only framing is checked here (lengths must stay inside the payload).
    """
    keys: list[bytes] = []
    size = len(data)
    read = _read_varint
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = read(data, pos)
            end = pos + length
            if length <= 0 or end > size:
                raise CorruptBatch(f"record length {length} at {pos} overruns the batch")
            p = pos + 1  # past the attributes; then skip the timestamp and offset deltas
            while data[p] >= 0x80:
                p += 1
            p += 1
            while data[p] >= 0x80:
                p += 1
            p += 1
            b = data[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = read(data, p)
            if n > 0:
                if p + n > end:
                    raise CorruptBatch(f"key of {n} bytes at {p} overruns its record")
                keys.append(data[p : p + n])
            pos = end
    except IndexError:
        raise CorruptBatch(f"records truncated at {pos}") from None
    return keys, pos


# Deltas of up to three varint bytes (|timestamp delta| < 2^20 ms, offset delta < 2^20):
# the layouts a uniform keyless batch's records may take.
_DELTA_SIZES: Final = (1, 2, 3)
_UNIFORM_MAX_VALUE: Final = 1 << 20


@lru_cache(maxsize=64)
def _uniform_keyless(value_size: int) -> Callable[[Buffer], re.Match | None]:
    """A matcher for a run of records with no key and no headers and ``value_size``-byte
    values. Each record's length varint is matched as the exact length its layout implies,
    so a match walks the same records that reading by lengths (record_keys) would."""
    tail = re.escape(_varint(value_size)) + b".{%d}\x00" % value_size  # value, no headers
    heads = _keyless_heads(1 + len(_varint(value_size)) + value_size + 1)
    return re.compile(b"(?:" + b"|".join(head + tail for head in heads) + b")*", re.DOTALL).fullmatch


def _keyless_heads(rest: int) -> list[bytes]:
    """Patterns of a keyless record's start, up to its key length -1, for each width of its
    deltas, its length varint the exact length of that layout with ``rest`` bytes from the
    key length on."""
    heads = []
    for ts_size in _DELTA_SIZES:
        for offset_size in _DELTA_SIZES:
            heads.append(re.escape(_varint(1 + ts_size + offset_size + rest)) + b"\x00"  # length, attributes
                         + b"[\x80-\xff]" * (ts_size - 1) + b"[\x00-\x7f]"
                         + b"[\x80-\xff]" * (offset_size - 1) + b"[\x00-\x7f]"
                         + b"\x01")  # key length -1
    return heads


def all_keyless(data: Buffer) -> bool:
    """True if a records payload is only records without key or headers whose values are
    all the size of the first one's: the common shape of a keyless producer's batch,
    checked in one regular-expression pass (~50 ns a record here, against ~300 ns for
    record_keys). False means "not known": read the keys with record_keys."""
    value_size = _keyless_value_size(data)
    return value_size is not None and _uniform_keyless(value_size)(data) is not None


def keyless_header_values(data: Buffer, name: bytes, size: int) -> list[bytes] | None:
    """The header values of a records payload that is only records without key whose values
    are all the size of the first one's and whose one header is ``name`` with a
    ``size``-byte value (the Spark writer's chunk of values, each with its UNIQ_KEY), in
    one regular-expression pass (~130 ns a record here, against ~400 ns for record_keys
    alone); None when it is not only such records (read them with record_keys)."""
    value_size = _keyless_value_size(data)
    if value_size is None:
        return None
    pattern = _uniform_keyless_header(value_size, name, size)
    if pattern.match(data) is None:  # the first record is not such: no search through the rest
        return None
    parts = pattern.split(data)
    # split leaves what lies between matches: only empty gaps mean the records are all such
    return None if any(parts[::2]) else parts[1::2]


def _keyless_value_size(data: Buffer) -> int | None:
    """The first record's value size if it has no key (and the size is one the uniform
    matchers take), else None."""
    try:
        pos = _read_varint(data, 0)[1] + 1  # past the length and the attributes
        for _ in range(2):  # timestamp and offset deltas
            while data[pos] >= 0x80:
                pos += 1
            pos += 1
        if data[pos] != 0x01:  # a key
            return None
        value_size = _read_varint(data, pos + 1)[0]
    except (IndexError, CorruptBatch):
        return None
    return value_size if 0 <= value_size <= _UNIFORM_MAX_VALUE else None


@lru_cache(maxsize=64)
def _uniform_keyless_header(value_size: int, name: bytes, size: int) -> re.Pattern:
    """`_uniform_keyless`'s records with one header, ``name`` with a ``size``-byte value
    (captured), instead of none: a split by it leaves only empty gaps when the payload is
    only such records."""
    header = b"\x02" + _varint(len(name)) + name + _varint(size)  # count 1, name, value size
    tail = re.escape(_varint(value_size)) + b".{%d}" % value_size + re.escape(header) + b"(.{%d})" % size
    heads = _keyless_heads(1 + len(_varint(value_size)) + value_size + len(header) + size)
    return re.compile(b"(?:" + b"|".join(heads) + b")" + tail, re.DOTALL)


def _decode_records(data: bytes, count: int) -> Iterator[Record]:
    # Varints are decoded inline when they take one byte (deltas, key length, header count,
    # header name and value lengths) or two (record and value lengths up to 8 KiB, offset
    # deltas up to 8191), and by _read_varint otherwise: a call per varint made decode of
    # 100 B records ~1.6x slower (measured, see bench notes).
    read = _read_varint
    pos = 0
    size = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = read(data, pos)
            record_end = pos + length
            if length <= 0 or record_end > size:
                raise CorruptBatch(f"record length {length} at {pos} overruns the batch")
            pos += 1  # record attributes: unused in magic 2
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = read(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                off_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                off_delta, pos = read(data, pos)
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = read(data, pos)
            if n < 0:
                key = None
            else:
                key = data[pos : pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                n = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                n, pos = read(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = read(data, pos)
            headers: list[tuple[str, bytes | None]] = []
            if n:
                if n < 0:
                    raise CorruptBatch(f"negative header count {n}")
                for _h in range(n):
                    b = data[pos]
                    if b < 0x80:
                        hlen = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        hlen, pos = read(data, pos)
                    if hlen < 0:
                        raise CorruptBatch("null header key")
                    hkey = data[pos : pos + hlen].decode("utf-8")
                    pos += hlen
                    b = data[pos]
                    if b < 0x80:
                        hlen = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        hlen, pos = read(data, pos)
                    if hlen < 0:
                        hval = None
                    else:
                        hval = data[pos : pos + hlen]
                        pos += hlen
                    headers.append((hkey, hval))
            if pos != record_end:
                raise CorruptBatch(f"record ends at {pos}, its length says {record_end}")
            yield Record(off_delta, ts_delta, key, value, headers)
    except IndexError:
        raise CorruptBatch(f"records truncated at {pos}") from None
    except UnicodeDecodeError as exc:
        raise CorruptBatch(f"header key is not UTF-8: {exc}") from None
    if pos != size:
        raise CorruptBatch(f"{size - pos} bytes after the last of {count} records")


def _encode_varint_uncached(value: int) -> bytes:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


# Zigzag varints of -8192..8191 (all 1- and 2-byte encodings) precomputed: build cost is
# dominated by varints, and deltas and lengths of typical records fall in this range.
_VARINT_BIAS: Final = 8192
_VARINT_TABLE: Final = tuple(_encode_varint_uncached(v) for v in range(-_VARINT_BIAS, _VARINT_BIAS))


def _varint(value: int) -> bytes:
    if -_VARINT_BIAS <= value < _VARINT_BIAS:
        return _VARINT_TABLE[value + _VARINT_BIAS]
    return _encode_varint_uncached(value)


_NULL: Final = _VARINT_TABLE[-1 + _VARINT_BIAS]


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode ``records`` as one magic-2 batch with a valid CRC32C (``control``: a
    transaction marker's batch)."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    varint = _varint
    table = _VARINT_TABLE
    bias = _VARINT_BIAS
    null = _NULL
    parts: list[bytes] = []
    append = parts.append
    max_ts_delta = records[0].timestamp_delta
    for r in records:
        ts_delta = r.timestamp_delta
        if ts_delta > max_ts_delta:
            max_ts_delta = ts_delta
        key = r.key
        value = r.value
        fields = [
            b"\x00",
            varint(ts_delta),
            varint(r.offset_delta),
            null if key is None else varint(len(key)),
            b"" if key is None else key,
            null if value is None else varint(len(value)),
            b"" if value is None else value,
            varint(len(r.headers)),
        ]
        for hkey, hval in r.headers:
            try:
                encoded = hkey.encode("utf-8")
            except UnicodeEncodeError:  # a name read from bytes that were not UTF-8 (a
                # remoting property): Kafka's header keys are UTF-8 strings, so U+FFFD
                encoded = hkey.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode()
            fields.append(varint(len(encoded)))
            fields.append(encoded)
            if hval is None:
                fields.append(null)
            else:
                fields.append(varint(len(hval)))
                fields.append(hval)
        body = b"".join(fields)
        n = len(body)
        append(table[n + bias] if n < bias else varint(n))
        append(body)
    payload = b"".join(parts)
    if compression:
        payload = compress(compression, payload)
    attributes = ((compression & ATTR_COMPRESSION_MASK) | (ATTR_TRANSACTIONAL if transactional else 0)
                  | (ATTR_CONTROL if control else 0))
    out = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - _LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        records[-1].offset_delta,
        base_timestamp,
        base_timestamp + max_ts_delta,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out[HEADER_SIZE:] = payload
    _U32.pack_into(out, _CRC_OFFSET, _crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)
