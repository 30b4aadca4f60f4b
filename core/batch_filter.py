"""Per-record filtering of inner batches (record batches stored as one CommitLog entry).

The store's prefilter works on ConsumeQueue tagsCodes, which an inner batch carries per
record, but its exact check cannot decode a batch; whoever decodes the batch for a reader
calls :func:`matching_records` so that a tag or SQL92 subscription sees the same answer
for a Kafka-produced record as for a RocketMQ message.

Record -> message mapping used by the filters:
- each header with a value becomes a property of the same name, its bytes decoded as
  UTF-8 (undecodable bytes kept via ``surrogateescape``, so they compare unequal to any
  SQL literal instead of failing); a header with a null value is a missing property, and
  when a name repeats the last value wins (as a property map can hold one);
- the tags are the value of the tag header (``TAGS`` unless the front-end configures
  another name, as the Kafka front-end does); no tag header means no tags;
- the record key and value are not properties: a filter never sees them.
Pure computation: never I/O, never a protocol.
"""

from __future__ import annotations

from .batch import Record, iter_records
from .filter import MessageFilter
from .message import PROPERTY_TAGS
from .store.get_result import Segment
from .store.record import HEADER_SIZE, I32, POS_BODY_LENGTH


def record_properties(record: Record) -> dict[str, str]:
    """A record's headers as message properties (see the module docstring)."""
    return {name: value.decode("utf-8", "surrogateescape")
            for name, value in record.headers if value is not None}


def matching_records(segment: Segment, message_filter: MessageFilter | None, *,
                     tag_header: str = PROPERTY_TAGS) -> list[tuple[int, Record]]:
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
            props = record_properties(record)
            if not message_filter.match(props.get(tag_header), props):
                continue
        out.append((offset, record))
    return out
