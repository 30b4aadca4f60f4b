"""StoredMessage: a plain CommitLog record read for delivery, decoded field by field.

A delivery group hands its messages out one by one (STOMP, AMQP) and a front-end mostly
needs the body, the queue offset and the properties as it will write them; decoding every
record whole (a header unpacked field by field, a properties dict, a host string pair, a
sixteen-field object) was a third of a STOMP drain's CPU. A StoredMessage is a MessageExt
made with what every delivery uses (body, queue offset, reconsume count, the properties'
octets) and a copy of its record, from which the rest is decoded when first read: the
header's other numbers together, the topic, the properties dict. A field written stays
as written (a later decode of its group leaves it). `properties_bytes` gives the
properties as stored, so a front-end can render them without a dict.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from rocketport.common.message import MessageExt, decode_properties, encode_properties

from .record import (
    HEADER,
    HEADER_SIZE,
    I32,
    MESSAGE_MAGIC_CODE,
    POS_BODY_LENGTH,
    BadRecord,
    ip_text,
)


class StoredMessage(MessageExt):
    """See the module docstring. Made from one whole record (bytes) and its queue offset."""

    __slots__ = ("record", "_raw", "_props")

    def __init__(self, record: bytes, queue_offset: int, body: bytes, raw_properties: bytes,
                 reconsume_times: int) -> None:
        self.record = record
        self.queue_offset = queue_offset
        self.body = body
        self.reconsume_times = reconsume_times
        self._raw = raw_properties
        self._props: dict[str, str] | None = None

    @property  # type: ignore[override]
    def properties(self) -> dict[str, str]:
        props = self._props
        if props is None:
            props = self._props = decode_properties(self._raw)
        return props

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._props = value

    def properties_bytes(self) -> bytes:
        """The properties encoded as stored: the record's own octets while the dict has
        not been made (a caller may have changed it since), else the dict encoded."""
        return self._raw if self._props is None else encode_properties(self._props)

    def __getattr__(self, name: str) -> Any:
        """A field not decoded yet (an unset slot): decode its group, then answer."""
        decode = _DECODERS.get(name)
        if decode is None:
            raise AttributeError(name)
        decode(self)
        return object.__getattribute__(self, name)


def _header(m: StoredMessage) -> None:
    (size, _, crc, queue_id, flag, _, physical, sys_flag, born_ts, born_ip, born_port, store_ts,
     store_ip, store_port, _, prepared, _) = HEADER.unpack_from(m.record)
    values = (size, crc, queue_id, flag, physical, sys_flag, born_ts, (ip_text(born_ip), born_port),
              store_ts, (ip_text(store_ip), store_port), prepared)
    for slot, value in zip(_HEADER_SLOTS, values):
        try:
            slot.__get__(m)  # written already: kept
        except AttributeError:
            slot.__set__(m, value)


def _topic(m: StoredMessage) -> None:
    record = m.record
    at = HEADER_SIZE + I32.unpack_from(record, POS_BODY_LENGTH)[0]
    m.topic = str(record[at + 1:at + 1 + record[at]], "utf-8", "replace")


_HEADER_FIELDS = ("store_size", "body_crc", "queue_id", "flag", "commit_log_offset", "sys_flag",
                  "born_timestamp", "born_host", "store_timestamp", "store_host",
                  "prepared_transaction_offset")
_HEADER_SLOTS = tuple(vars(MessageExt)[name] for name in _HEADER_FIELDS)
_DECODERS: dict[str, Callable[[StoredMessage], None]] = {
    **dict.fromkeys(_HEADER_FIELDS, _header),
    "topic": _topic,
}


def stored_messages(view: memoryview, first_offset: int, count: int) -> list[StoredMessage]:
    """The ``count`` plain records that lie back to back in ``view``, the first at queue
    offset ``first_offset``, each with a copy of its own bytes (a delivery may be held
    long after the read: it pins nothing else). What every delivery is read for (body,
    properties, reconsume count) is cut out at once."""
    data = bytes(view)
    out: list[StoredMessage] = []
    pos = 0
    unpack = _WALK.unpack_from
    append = out.append
    for offset in range(first_offset, first_offset + count):
        size, magic, reconsume_times, body_length = unpack(data, pos)
        if magic != MESSAGE_MAGIC_CODE:
            raise BadRecord(f"bad magic {magic & 0xFFFFFFFF:#x}")
        at = pos + HEADER_SIZE + body_length
        props_at = at + 3 + data[at]  # past the topic and the properties' length
        end = pos + size
        append(StoredMessage(data[pos:end], offset, data[pos + HEADER_SIZE:at],
                             data[props_at:end], reconsume_times))
        pos = end
    return out


# totalSize, magic, then reconsumeTimes and bodyLength (see record.HEADER)
_WALK = struct.Struct(">ii64xi8xi")
assert _WALK.size == HEADER_SIZE
