"""A run of plain messages as one record batch: what a front-end gathers, stored as one.

A front-end whose clients send one message per request (AMQP publishes, STOMP SENDs) can
still store a run of them that arrived together for one topic as ONE inner batch (one
CommitLog record, one ConsumeQueue offset per message; ``Broker.put_gathered``): the
per-record cost of the store (record header, CRC, properties encoding, dispatch) is paid
once for the run. Every reader serves such a record per message (``core.batch.messages``),
so each message is built here as the record that reads back as that message:

- value = the body; key = the ``KEYS`` property (the key index reads record keys);
- the ``TAGS`` property as the tag header (``kafkaTagHeader``): Kafka consumers see it there
  as for plain messages, and recovery derives each entry's tags code from it
  (``core.batch.record_tags``), the same code given here;
- every other property as a header (UTF-8, ``surrogateescape``), and ``UNIQ_KEY`` from the
  ids given when the message has none: records of one batch share one commit-log offset,
  hence one offsetMsgId, and RocketMQ clients name a message by its UNIQ_KEY first.

Pure (no I/O, no store, no protocol). Hot path: records are encoded straight to bytes with
the varint table of ``record_batch`` and the encoded headers of recent property sets are
remembered (messages of one publisher look alike).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import crc32c as _crc32c

from ..message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from ..tags import tags_code
from .record_batch import (_CRC_OFFSET, _CRC_START, _LOG_OVERHEAD, _NULL, _U32, HEADER, HEADER_SIZE, MAGIC,
                           _varint)

__all__ = ["GatheredBatch", "build_gathered"]

_UNIQ: Final = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_UNIQ_NAME: Final = _varint(len(_UNIQ)) + _UNIQ.encode()
_SHAPES_MAX: Final = 4096


@dataclass(slots=True)
class GatheredBatch:
    """The batch bytes (v2 layout, baseOffset 0, valid CRC) and each record's tags code
    (one int when every record has the same: the ConsumeQueue entries are then one entry
    repeated); ``shared_tag``: the tag every record carries, else None (stored as the
    batch's TAGS)."""

    batch: bytes
    count: int
    tags_codes: int | list[int]
    shared_tag: str | None


# per (tag header, properties as items): (key part, tail: header count + headers, tag, code,
# whether a UNIQ_KEY is among the headers)
_Shape = tuple[bytes, bytes, int, str | None, int, bool]
_shapes: dict[tuple, _Shape] = {}


def _text(value: str) -> bytes:
    return value.encode("utf-8", "surrogateescape")


def _shape(items: tuple[tuple[str, str], ...], tag_header: str) -> _Shape:
    key = b""
    tag = None
    headers: list[bytes] = []
    has_uniq = False
    for name, value in items:
        if name == PROPERTY_KEYS:
            raw = _text(value)
            key = _varint(len(raw)) + raw
        elif name == PROPERTY_TAGS:
            tag = value
        else:
            if name == tag_header:
                raise ValueError(f"property {name!r} is the tag header: a gathered record's tag is its TAGS")
            has_uniq = has_uniq or name == _UNIQ
            raw_name, raw = _text(name), _text(value)
            headers.append(_varint(len(raw_name)) + raw_name + _varint(len(raw)) + raw)
    if tag:
        raw_name, raw = _text(tag_header), _text(tag)
        headers.append(_varint(len(raw_name)) + raw_name + _varint(len(raw)) + raw)
    else:
        tag = None
    return (key or _NULL, b"".join(headers), len(headers), tag, tags_code(tag), has_uniq)


def build_gathered(entries: Sequence[tuple[bytes, Mapping[str, str]]], ids: Sequence[str],
                   born_timestamp: int, tag_header: str) -> GatheredBatch:
    """One batch of ``entries`` (body, properties), in order; ``ids[i]`` is record i's
    UNIQ_KEY unless its properties name one. Raises ValueError for an empty run or a
    property named like the tag header (its tag would be ambiguous)."""
    count = len(entries)
    if not count:
        raise ValueError("a gathered batch holds at least one message")
    varint = _varint
    shapes = _shapes
    parts: list[bytes] = []
    append = parts.append
    codes: list[int] = []
    code_of = codes.append
    tags: set[str | None] = set()
    last = None  # a publisher's run mostly repeats one properties object: its shape, once
    for i, (body, props) in enumerate(entries):
        if props is not last:
            items = (tag_header, *props.items())
            shape = shapes.get(items)
            if shape is None:
                if len(shapes) >= _SHAPES_MAX:
                    shapes.clear()
                shape = shapes[items] = _shape(items[1:], tag_header)
            key, headers, n_headers, tag, code, has_uniq = shape
            if has_uniq:
                tail = varint(n_headers) + headers
            else:
                count_and_name = varint(n_headers + 1) + _UNIQ_NAME
            tags.add(tag)
            last = props
        if has_uniq:
            record_tail = tail
        else:  # UNIQ_KEY first: readers that skip it see the rest of the properties in order
            uniq = ids[i].encode()
            record_tail = count_and_name + varint(len(uniq)) + uniq + headers
        offset_delta = varint(i)
        body_size = varint(len(body))
        append(varint(2 + len(offset_delta) + len(key) + len(body_size) + len(body) + len(record_tail)))
        append(b"\x00\x00")  # attributes, timestamp delta
        append(offset_delta)
        append(key)
        append(body_size)
        append(body)
        append(record_tail)
        code_of(code)
    payload = b"".join(parts)
    header = HEADER.pack(0, HEADER_SIZE - _LOG_OVERHEAD + len(payload), -1, MAGIC, 0, 0, count - 1,
                         born_timestamp, born_timestamp, -1, -1, -1, count)
    crc = _crc32c.crc32c(payload, _crc32c.crc32c(header[_CRC_START:]))
    batch = b"".join((header[:_CRC_OFFSET], _U32.pack(crc), header[_CRC_START:], payload))
    if len(tags) == 1:
        return GatheredBatch(batch, count, codes[0], tags.pop())
    return GatheredBatch(batch, count, codes, None)
