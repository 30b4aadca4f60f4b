"""MessageExt wire records for pull, query and view responses.

A pull body is the CommitLog's own bytes: plain segments go out as the store's memoryview
slices, untouched. Two cases need records built here, with the store's record encoder
(the store owns the layout; this module never re-implements it):
- inner-batch segments, where one CommitLog record holds a Kafka record batch: each wanted
  record that matches the subscription becomes a MessageExt (key -> KEYS, headers ->
  properties, tag header -> TAGS, as `core.batch.messages` maps them; queue offset = batch
  base + delta,
  commit-log offset = the batch record's, so an offset id finds the batch);
- messages the facade returns decoded (query by key, view by id).
Nothing here does I/O or reads the store directly.
"""

from __future__ import annotations

from rocketport.core.batch.record_batch import parse_header
from rocketport.core.batch.messages import DEFAULT_TAG_HEADER, record_properties
from rocketport.core.batch_filter import matching_records
from rocketport.core.filter import MessageFilter
from rocketport.core.message import (
    INNER_BATCH_FLAG,
    MessageExt,
    encode_properties,
)
from rocketport.core.store.get_result import GetResult, Segment
from rocketport.core.store.record import decode_record, encode_record, ip_bytes

from .command import Buffer


def message_ext_record(msg: MessageExt) -> bytes:
    """The wire record of a decoded message (same bytes the CommitLog held)."""
    return encode_record(
        topic_bytes=msg.topic.encode(), body=msg.body, props_bytes=encode_properties(msg.properties),
        queue_id=msg.queue_id, flag=msg.flag, queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_ip=ip_bytes(msg.born_host[0]),
        born_port=msg.born_host[1], store_timestamp=msg.store_timestamp,
        store_ip=ip_bytes(msg.store_host[0]), store_port=msg.store_host[1],
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, crc=msg.body_crc,
    )


def _expand_inner_batch(segment: Segment, message_filter: MessageFilter | None,
                        tag_header: str) -> bytes:
    """The wanted records of an inner-batch segment that match, as MessageExt records.

    Filtering happens here because the store's exact check cannot look inside a batch;
    `core.batch_filter` decides matches with the mapping of `core.batch.messages`, so a
    filter sees the same message a consumer receives.
    """
    outer = decode_record(segment.view)
    header = parse_header(outer.body)
    topic = outer.topic.encode()
    born_ip, born_port = ip_bytes(outer.born_host[0]), outer.born_host[1]
    store_ip, store_port = ip_bytes(outer.store_host[0]), outer.store_host[1]
    common = {k: v for k, v in outer.properties.items() if not k.startswith("INNER_")}
    sys_flag = outer.sys_flag & ~INNER_BATCH_FLAG
    out: list[bytes] = []
    for offset, record in matching_records(segment, message_filter, tag_header=tag_header):
        properties = {**common, **record_properties(record.key, record.headers, tag_header)}
        out.append(encode_record(
            topic_bytes=topic, body=record.value or b"", props_bytes=encode_properties(properties),
            queue_id=outer.queue_id, flag=outer.flag, queue_offset=offset,
            physical_offset=outer.commit_log_offset, sys_flag=sys_flag,
            born_timestamp=header.base_timestamp + record.timestamp_delta, born_ip=born_ip,
            born_port=born_port, store_timestamp=outer.store_timestamp, store_ip=store_ip,
            store_port=store_port, reconsume_times=0, prepared_transaction_offset=0,
        ))
    return b"".join(out)


def pull_body(result: GetResult, message_filter: MessageFilter | None = None,
              tag_header: str = DEFAULT_TAG_HEADER) -> list[Buffer]:
    """The PULL_MESSAGE body for `result`: CommitLog slices, inner batches expanded."""
    body: list[Buffer] = []
    for seg in result.segments:
        if seg.batch_base is None:
            body.append(seg.view)
        else:
            body.append(_expand_inner_batch(seg, message_filter, tag_header))
    return body
