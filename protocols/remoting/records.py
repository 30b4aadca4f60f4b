"""MessageExt wire records for pull, query and view responses.

A pull body is the CommitLog's own bytes: plain segments go out as the store's memoryview
slices, untouched. Two cases need records built here, with the store's record encoder
(the store owns the layout; this module never re-implements it):
- inner-batch segments, where one CommitLog record holds a Kafka record batch: each wanted
  record that matches the subscription becomes a MessageExt (key -> KEYS, headers ->
  properties, tag header -> TAGS, as `core.batch.messages` maps them; queue offset = batch
  base + delta, commit-log offset = the batch record's, so an offset id finds the batch).
  The batch is read through the core's one expander (`StoredBatch`, `batches_of`): decoded
  once however many pulls or filter-cut segments read it, and only the records a pull
  asks for are encoded;
- messages the facade returns decoded (query by key, view by id);
- records keeping an AMQP header table whole (`PROPERTY_AMQP_HEADERS`), which a RocketMQ
  consumer reads as each header's user property, as text (`with_header_texts`): looked
  for only in topics the facade says may hold them (`may_hold_header_tables`), so a pull
  of any other topic stays the store's bytes.
Nothing here does I/O or reads the store directly.
"""

from __future__ import annotations

from rocketport.common.batch.messages import DEFAULT_TAG_HEADER
from rocketport.common.field_table import AMQP_HEADERS_NEEDLE, with_header_texts
from rocketport.common.message import (
    INNER_BATCH_FLAG,
    MessageExt,
    encode_properties,
)
from rocketport.core.facade.types import (
    I32,
    GetResult,
    MessageFilter,
    Segment,
    StoredBatch,
    batches_of,
    decode_record,
    encode_record,
    ip_bytes,
)

from .command import Buffer


def message_ext_record(msg: MessageExt) -> bytes:
    """The wire record of a decoded message (same bytes the CommitLog held, but a kept AMQP
    header table's headers as text)."""
    return encode_record(
        topic_bytes=msg.topic.encode(), body=msg.body, props_bytes=encode_properties(with_header_texts(msg.properties)),
        queue_id=msg.queue_id, flag=msg.flag, queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_ip=ip_bytes(msg.born_host[0]),
        born_port=msg.born_host[1], store_timestamp=msg.store_timestamp,
        store_ip=ip_bytes(msg.store_host[0]), store_port=msg.store_host[1],
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, crc=msg.body_crc,
    )


def _expand_inner_batch(batch: StoredBatch, segment: Segment, message_filter: MessageFilter | None,
                        tag_header: str) -> bytes:
    """The wanted records of an inner-batch segment that match, as MessageExt records.

    Filtering happens here because the store's exact check cannot look inside a batch;
    `StoredBatch.matching` decides matches with the mapping of `core.batch.messages`, so a
    filter sees the same message a consumer receives (and the properties it built are the
    ones encoded).
    """
    wanted = batch.matching(segment.first_offset, segment.count, message_filter, tag_header)
    if not wanted:
        return b""
    topic = batch.topic.encode()
    common = {k: v for k, v in batch.properties.items() if not k.startswith("INNER_")}
    sys_flag = batch.sys_flag & ~INNER_BATCH_FLAG
    record_at = batch.batch.record
    properties = batch.batch.properties
    base_timestamp = batch.batch.base_timestamp
    out: list[bytes] = []
    for offset, i in wanted:
        record = record_at(i)
        props = properties(i, tag_header)
        out.append(encode_record(
            topic_bytes=topic, body=record.value or b"",
            props_bytes=encode_properties({**common, **props} if common else props),
            queue_id=batch.queue_id, flag=batch.flag, queue_offset=offset,
            physical_offset=batch.commit_log_offset, sys_flag=sys_flag,
            born_timestamp=base_timestamp + record.timestamp_delta, born_ip=batch.born_ip,
            born_port=batch.born_port, store_timestamp=batch.store_timestamp,
            store_ip=batch.store_ip, store_port=batch.store_port, reconsume_times=0,
            prepared_transaction_offset=0,
        ))
    return b"".join(out)


def pull_body(result: GetResult, message_filter: MessageFilter | None = None,
              tag_header: str = DEFAULT_TAG_HEADER, header_tables: bool = False) -> list[Buffer]:
    """The PULL_MESSAGE body for `result`: CommitLog slices, inner batches expanded, and
    with ``header_tables`` (the topic may hold kept AMQP header tables) such records shown
    with their headers as text."""
    body: list[Buffer] = []
    segments = result.segments
    for i, seg in enumerate(segments):
        if seg.batch_base is not None:  # from the first inner batch on, records are opened
            for rest, batch in batches_of(segments[i:]):
                if batch is not None:
                    body.append(_expand_inner_batch(batch, rest, message_filter, tag_header))
                elif header_tables:
                    body += _with_header_texts(rest.view)
                else:
                    body.append(rest.view)
            break
        if header_tables:
            body += _with_header_texts(seg.view)
        else:
            body.append(seg.view)  # plain records: the mmap slices as they are, no generator
    return body


def _with_header_texts(view: memoryview) -> list[Buffer]:
    """Plain records back to back, those keeping an AMQP header table re-encoded with its
    headers as user properties (text), the others as they are."""
    if AMQP_HEADERS_NEEDLE not in view.tobytes():
        return [view]
    out: list[Buffer] = []
    pos, end = 0, len(view)
    while pos < end:
        size = I32.unpack_from(view, pos)[0]
        record = view[pos:pos + size]
        out.append(message_ext_record(decode_record(view, pos)) if AMQP_HEADERS_NEEDLE in record.tobytes()
                   else record)
        pos += size
    return out
