"""Every Kafka codec round-trips, and inputs produced by other producers' framings decode."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from rocketport.common.batch import compression as c

DATA = b"".join(b"record %d payload " % i * 3 for i in range(5000))  # ~400 KiB, compressible


@pytest.mark.parametrize("codec", [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_round_trip(codec: int) -> None:
    packed = c.compress(codec, DATA)
    if codec:
        assert len(packed) < len(DATA) // 4
    assert c.decompress(codec, packed) == DATA
    assert c.decompress(codec, memoryview(packed)) == DATA


def test_snappy_output_is_xerial_framed_in_32k_blocks() -> None:
    packed = c.compress(c.SNAPPY, DATA)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">I", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert all(len(b) == 32 * 1024 for b in blocks[:-1])
    assert b"".join(blocks) == DATA


def test_snappy_accepts_raw_block_and_hand_built_xerial() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert c.decompress(c.SNAPPY, raw) == DATA
    # xerial framing as snappy-java writes it, with uneven block sizes
    chunks = [DATA[:1000], DATA[1000:70000], DATA[70000:]]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for chunk in chunks:
        block = bytes(cramjam.snappy.compress_raw(chunk))
        framed += struct.pack(">I", len(block)) + block
    assert c.decompress(c.SNAPPY, framed) == DATA


def test_foreign_encoders_decode() -> None:
    assert c.decompress(c.GZIP, gzip.compress(DATA)) == DATA
    assert c.decompress(c.LZ4, lz4.frame.compress(DATA, content_checksum=True)) == DATA
    # zstd-jni streams carry no content size; two frames back to back must both be read
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    two = cctx.compress(DATA[:1000]) + cctx.compress(DATA[1000:])
    assert c.decompress(c.ZSTD, two) == DATA


def test_lz4_frame_settings_match_kafka() -> None:
    info = lz4.frame.get_frame_info(c.compress(c.LZ4, DATA))
    assert info["block_size"] == 64 * 1024
    assert not info["block_linked"]
    assert not info["content_checksum"]
    assert info["content_size"] == 0


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_garbage_and_truncation_raise_compression_error(codec: int) -> None:
    packed = c.compress(codec, DATA)
    with pytest.raises(c.CompressionError):
        c.decompress(codec, packed[: len(packed) // 2])
    with pytest.raises(c.CompressionError):
        c.decompress(codec, b"\x82SNAPPY\x00garbage-garbage" if codec == c.SNAPPY else b"garbage-garbage!")


def test_unknown_codec() -> None:
    with pytest.raises(c.CompressionError):
        c.compress(5, DATA)
    with pytest.raises(c.CompressionError):
        c.decompress(7, DATA)


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_output_beyond_the_limit_is_refused(codec: int) -> None:
    packed = c.compress(codec, DATA)
    assert c.decompress(codec, packed, limit=len(DATA)) == DATA
    with pytest.raises(c.CompressionError, match="exceeds"):
        c.decompress(codec, packed, limit=len(DATA) - 1)


def test_raw_snappy_block_over_the_limit_is_refused_before_decompressing() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    with pytest.raises(c.CompressionError, match="exceeds"):
        c.decompress(c.SNAPPY, raw, limit=1000)


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_compression_bomb_is_refused_at_the_default_limit(codec: int) -> None:
    # 80 MiB of zeros compress to a few MiB at most (snappy's ratio is the lowest, ~21:1);
    # zstd without a content size, as zstd-jni writes it
    zeros = bytes(16 * 1024 * 1024)
    if codec == c.ZSTD:
        cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
        bomb = b"".join(cobj.compress(zeros) for _ in range(5)) + cobj.flush()
    elif codec == c.GZIP:
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb = b"".join(z.compress(zeros) for _ in range(5)) + z.flush()
    else:
        bomb = c.compress(codec, zeros * 5)
    assert len(bomb) < 5 * 1024 * 1024
    with pytest.raises(c.CompressionError, match="exceeds"):
        c.decompress(codec, bomb)
