"""Per-record filtering of inner batches (record batches stored as one CommitLog entry).

The store's prefilter works on ConsumeQueue tagsCodes, which an inner batch carries per
record, but its exact check cannot decode a batch; whoever decodes the batch for a reader
calls :func:`matching_records` so that a tag or SQL92 subscription sees the same answer
for a Kafka-produced record as for a RocketMQ message.

Records are seen as messages through the one mapping of core.batch.messages (headers as
properties, the key as KEYS, the tag header as TAGS), the same view the index, key lookups
and every front-end use.
Pure computation: never I/O, never a protocol.
"""

from __future__ import annotations

from .batch import Record, iter_records
from .batch.messages import DEFAULT_TAG_HEADER, record_properties
from .filter import MessageFilter
from .message import PROPERTY_TAGS
from .store.get_result import Segment
from .store.record import HEADER_SIZE, I32, POS_BODY_LENGTH


def matching_records(segment: Segment, message_filter: MessageFilter | None, *,
                     tag_header: str = DEFAULT_TAG_HEADER) -> list[tuple[int, Record]]:
    """(logical offset, record) of the wanted records of an inner-batch segment that match.

    Only offsets ``[first_offset, first_offset + count)`` are considered; the batch's
    records are decoded once (decompressing if needed). Raises CorruptBatch for a batch
    that does not decode.
    """
    if segment.batch_base is None:
        raise ValueError("not an inner-batch segment")
    view = segment.view
    (body_len,) = I32.unpack_from(view, POS_BODY_LENGTH)
    batch = view[HEADER_SIZE:HEADER_SIZE + body_len]
    first, end = segment.first_offset, segment.first_offset + segment.count
    out = []
    for record in iter_records(batch):
        offset = segment.batch_base + record.offset_delta
        if offset < first:
            continue
        if offset >= end:
            break
        if message_filter is not None:
            props = record_properties(record.key, record.headers, tag_header)
            if not message_filter.match(props.get(PROPERTY_TAGS), props):
                continue
        out.append((offset, record))
    return out
