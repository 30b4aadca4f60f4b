"""Compression codecs of Kafka record batches (attribute bits 0-2), for the store's inner batches.

The store keeps Kafka batches whole and only decompresses when it must read per-message
content (filters, retry, remoting pulls). Codec ids are Kafka's: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. Each codec produces what the Java producer produces, so every Kafka consumer
that reads Java-produced data reads ours:

- gzip: RFC 1952 stream.
- snappy: xerial (snappy-java) framing on output; on input both xerial framing and a bare
  raw snappy block (librdkafka and kafka-python may send either).
- lz4: LZ4 frame format, 64 KiB independent blocks, no content size, no content checksum
  (Kafka's KafkaLZ4BlockOutputStream settings).
- zstd: one zstd frame; input may hold several frames or lack the content size.

This module must never import a protocol package, and never decide what a codec id means
to a client: it only turns bytes into bytes.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "CompressionError",
    "MAX_DECOMPRESSED_SIZE",
    "compress",
    "decompress",
]

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

CODEC_NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

Buffer = bytes | bytearray | memoryview


class CompressionError(ValueError):
    """Unknown codec id or data that does not decompress; callers map it to CORRUPT_MESSAGE."""


# snappy-java's stream header: magic, then format version 1 and minimum compatible version 1.
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024  # snappy-java's default block size
_U32: Final = struct.Struct(">I")

_ZSTD_COMPRESSOR: Final = zstandard.ZstdCompressor(level=3)
_ZSTD_DECOMPRESSOR: Final = zstandard.ZstdDecompressor()
# zstd input is fed in steps this long, so that one step of a "zip bomb" (RLE blocks expand
# 4 bytes into 128 KiB) can overshoot the limit by at most 32 MiB before it is noticed.
_ZSTD_STEP: Final = 1024

# A batch whose payload expands beyond this is refused: a few KiB of zeros compress to
# nothing, and decompressing them unbounded would let one request exhaust the broker's memory.
MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024


def compress(codec: int, data: Buffer) -> bytes:
    """Compress ``data`` the way the Java producer would for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31 = gzip container
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return _ZSTD_COMPRESSOR.compress(data)
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, limit: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress ``data`` of ``codec`` into at most ``limit`` bytes.

    Any codec failure, and output beyond ``limit``, becomes :class:`CompressionError`.
    """
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            d = zlib.decompressobj(47)  # 32 + 15: accept gzip or zlib header
            out = d.decompress(data, limit + 1)
            if len(out) > limit:
                raise CompressionError(_too_large(limit))
            if not d.eof:
                raise CompressionError("truncated gzip stream")
            return out
        if codec == SNAPPY:
            if bytes(data[:8]) == _XERIAL_MAGIC:
                return _xerial_decompress(memoryview(data), limit)
            _check_snappy_length(data, limit)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=limit + 1)
            if len(out) > limit:
                raise CompressionError(_too_large(limit))
            if not d.eof:
                raise CompressionError("truncated lz4 frame")
            return out
        if codec == ZSTD:
            return _zstd_decompress(memoryview(data), limit)
    except CompressionError:
        raise
    except Exception as exc:  # codec libraries raise their own types; one reason for callers
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} decompression failed: {exc}") from exc
    raise CompressionError(f"unknown compression codec {codec}")


def _too_large(limit: int) -> str:
    return f"decompressed payload exceeds {limit} bytes"


def _zstd_decompress(view: memoryview, limit: int) -> bytes:
    """Frame by frame: zstd-jni omits the content size, and a truncated frame must fail."""
    out = []
    total = pos = 0
    end = len(view)
    while pos < end:
        d = _ZSTD_DECOMPRESSOR.decompressobj()
        while pos < end and not d.eof:
            chunk = d.decompress(view[pos : pos + _ZSTD_STEP])
            pos += _ZSTD_STEP
            total += len(chunk)
            if total > limit:
                raise CompressionError(_too_large(limit))
            out.append(chunk)
        if not d.eof:
            raise CompressionError("truncated zstd frame")
        pos = min(pos, end) - len(d.unused_data)
    return b"".join(out)


def _check_snappy_length(block: Buffer, limit: int) -> int:
    """A raw snappy block starts with its uncompressed length (varint): check it first."""
    length = shift = 0
    for i in range(5):
        if i >= len(block):
            break
        byte = block[i]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if length > limit:
                raise CompressionError(_too_large(limit))
            return length
        shift += 7
    raise CompressionError("snappy block without a valid length")


def _xerial_compress(data: Buffer) -> bytes:
    """snappy-java framing: header, then (u32 length, raw snappy block) per 32 KiB of input."""
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_U32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_decompress(view: memoryview, limit: int) -> bytes:
    pos = len(_XERIAL_HEADER)
    total = 0
    if len(view) < pos:
        raise CompressionError("truncated xerial snappy header")
    out = []
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise CompressionError("truncated xerial snappy block length")
        (n,) = _U32.unpack_from(view, pos)
        pos += 4
        if pos + n > end:
            raise CompressionError("truncated xerial snappy block")
        block = view[pos : pos + n]
        total += _check_snappy_length(block, limit - total)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += n
    return b"".join(out)
