"""What a broker checks of a record batch a client sent, before it stores the batch whole
(one CommitLog record, one message per record): the Kafka front-end's Produce and a
remoting send flagged INNER_BATCH_FLAG (core.facade.produce) check it the same way, so a
batch one of them refuses the other does not store.
"""

from __future__ import annotations

from typing import Final

from ..message import PROPERTY_TAGS
from .compression import decompress
from .record_batch import HEADER_SIZE, BatchHeader, CorruptBatch, parse_header, verify_crc
from .record_tags import codes_and_shared, payload_tags

Buffer = bytes | bytearray | memoryview

MIN_RECORD_SIZE: Final = 7  # length, attributes, 2 deltas, key/value lengths, header count


def checked_header(view: memoryview) -> BatchHeader:
    """The batch's header once its CRC32C holds and its record count agrees with its last
    offset delta; CorruptBatch otherwise."""
    header = parse_header(view)
    if not verify_crc(view):
        raise CorruptBatch("CRC32C mismatch")
    count = header.records_count
    if count < 1 or header.last_offset_delta != count - 1:
        raise CorruptBatch(f"{count} records but last offset delta {header.last_offset_delta}")
    return header


def checked_payload(view: memoryview, header: BatchHeader) -> Buffer:
    """The records payload, decompressed (CompressionError when it does not); CorruptBatch
    when it cannot hold the header's count, which would make the store index phantom
    offsets."""
    payload: Buffer = view[HEADER_SIZE:]
    if header.compression:
        payload = decompress(header.compression, payload)
    if header.records_count > len(payload) // MIN_RECORD_SIZE:
        raise CorruptBatch(f"{header.records_count} records cannot fit in {len(payload)} bytes")
    return payload


def stored_tags(payload: Buffer, count: int, tag_header: str) -> tuple[int | list[int], dict[str, str] | None]:
    """(each record's tags code, or 0 when none has a tag; the batch's TAGS property when every
    record shares one tag, so exact filter checks that read the batch whole see it). Recovery
    derives the same codes from the stored batch (record_tags), so they survive a crash."""
    tags = payload_tags(payload, count, tag_header)  # None, undecoded, when no record has a tag
    if tags is None:
        return 0, None
    codes, shared = codes_and_shared(tags)
    return codes, ({PROPERTY_TAGS: shared} if shared is not None else None)
