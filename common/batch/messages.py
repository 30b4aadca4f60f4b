"""The per-message view of a stored inner batch: the one mapping from records to messages.

Filters, the index, key and id lookups and every front-end that serves per-message records
see a record of a stored batch the same way:

- body = the record value (empty for a null value);
- properties = the record headers, values decoded as UTF-8 with ``surrogateescape`` (so
  binary values survive a round trip byte-exact and compare unequal to any SQL literal);
  a header with a null value is a missing property, and when a name repeats the last value
  wins (a property map holds one); plus ``KEYS`` = the record key (same decoding) when there
  is one, and ``TAGS`` = the value of the tag header (``tag`` unless configured otherwise)
  when the record has one and no explicit ``TAGS`` header;
- born timestamp = the batch's base timestamp + the record's timestamp delta;
- queue offset = the batch's base offset + the record's offset delta;
- commit-log offset, store timestamp, hosts, queue id and topic: those of the batch record.

This module holds the part that needs only the record (its properties); the store applies
the rest, reading the batch's CommitLog record (``core.store.inner_batch``), through the
one expander (``core.batch.expander``). It never imports the store or a protocol.
"""

from __future__ import annotations

from ..message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from .record_batch import Buffer, keyless_header_values

DEFAULT_TAG_HEADER = "tag"
UNIQ_SIZE = 32  # a RocketMQ client's message id: 32 hex characters
UNIFORM_CHECK_MAX = 8192  # records a batch may have for one `unique_ids_only` pass (~1 ms)
_UNIQ_NAME = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()


def record_properties(key: bytes | None, headers: list[tuple[str, bytes | None]],
                      tag_header: str = DEFAULT_TAG_HEADER) -> dict[str, str]:
    props = {name: value.decode("utf-8", "surrogateescape")
             for name, value in headers if value is not None}
    if key is not None:
        props[PROPERTY_KEYS] = key.decode("utf-8", "surrogateescape")
    if PROPERTY_TAGS not in props and tag_header in props:
        props[PROPERTY_TAGS] = props[tag_header]
    return props


def unique_ids_only(payload: Buffer, count: int) -> list[bytes] | None:
    """Each of the ``count`` records' UNIQ_KEY when every record is keyless, its value the
    size of the others', and its one header its UNIQ_KEY of 32 characters (the Spark
    writer's chunks of values): then its message has no KEYS, no TAGS and no property but
    that id, and the id is all the index needs. None when that is not so (or not known),
    told in one pass over the records (record_batch.keyless_header_values)."""
    if count > UNIFORM_CHECK_MAX:
        return None
    ids = keyless_header_values(payload, _UNIQ_NAME, UNIQ_SIZE)
    return ids if ids is not None and len(ids) == count else None


__all__ = ["DEFAULT_TAG_HEADER", "UNIQ_SIZE", "record_properties", "unique_ids_only"]
