"""The per-message view of a stored inner batch: the one mapping from records to messages.

Filters, the index, key and id lookups and every front-end that serves per-message records
see a record of a stored batch the same way:

- body = the record value (empty for a null value);
- properties = the record headers, values decoded as UTF-8 with ``surrogateescape`` (so
  binary values survive a round trip byte-exact), plus ``KEYS`` = the record key (same
  decoding) when there is one, and ``TAGS`` = the value of the tag header (``tag`` unless
  configured otherwise) when the record has one and no explicit ``TAGS`` header;
- born timestamp = the batch's base timestamp + the record's timestamp delta;
- queue offset = the batch's base offset + the record's offset delta;
- commit-log offset, store timestamp, hosts, queue id and topic: those of the batch record.

It decodes; it never writes and never imports a protocol.
"""

from __future__ import annotations

from typing import Iterator

from ..message import PROPERTY_KEYS, PROPERTY_TAGS, MessageExt
from ..store.record import decode_record
from .record_batch import iter_records, parse_header

DEFAULT_TAG_HEADER = "tag"


def record_properties(key: bytes | None, headers: list[tuple[str, bytes | None]],
                      tag_header: str = DEFAULT_TAG_HEADER) -> dict[str, str]:
    props: dict[str, str] = {}
    for name, value in headers:
        props[name] = "" if value is None else value.decode("utf-8", "surrogateescape")
    if key is not None:
        props[PROPERTY_KEYS] = key.decode("utf-8", "surrogateescape")
    if PROPERTY_TAGS not in props and tag_header in props:
        props[PROPERTY_TAGS] = props[tag_header]
    return props


def batch_messages(record: memoryview | bytes, tag_header: str = DEFAULT_TAG_HEADER,
                   first_offset: int | None = None) -> Iterator[MessageExt]:
    """Messages of the inner-batch CommitLog ``record`` (from ``first_offset`` on)."""
    outer = decode_record(record)
    batch = outer.body
    header = parse_header(batch)
    skip = 0 if first_offset is None else first_offset - outer.queue_offset
    for rec in iter_records(batch):
        if rec.offset_delta < skip:
            continue
        body = rec.value or b""
        yield MessageExt(
            topic=outer.topic, body=body,
            properties=record_properties(rec.key, rec.headers, tag_header),
            queue_id=outer.queue_id, queue_offset=outer.queue_offset + rec.offset_delta,
            commit_log_offset=outer.commit_log_offset, store_size=outer.store_size,
            body_crc=outer.body_crc, flag=outer.flag, sys_flag=outer.sys_flag,
            born_timestamp=header.base_timestamp + rec.timestamp_delta,
            born_host=outer.born_host, store_timestamp=outer.store_timestamp,
            store_host=outer.store_host, reconsume_times=0, prepared_transaction_offset=0)


__all__ = ["DEFAULT_TAG_HEADER", "batch_messages", "record_properties"]
