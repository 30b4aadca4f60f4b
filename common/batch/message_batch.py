"""RocketMQ's MessageBatch body: the encoding a client sends for a batch send.

Repeated entries of totalSize i32, magic i32, bodyCRC i32 (clients write 0 for both),
flag i32, body length i32 + body, properties length i16 + encoded properties. The topic,
queue and the other fields are the request header's, shared by every entry.

The store writes these entries as records in one pass
(`MessageStore.put_message_batch`); `decode_batch` is the plain reader for everything
else. Nothing here does I/O or imports a protocol.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidMessage
from ..message import decode_properties, encode_properties

ENTRY_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLength
PROPS_LEN = struct.Struct(">h")
MIN_ENTRY_SIZE = ENTRY_HEAD.size + PROPS_LEN.size


@dataclass(slots=True)
class BatchMessage:
    """One message of a batch send: what the client controls (topic comes from the header)."""

    body: bytes | memoryview
    properties: dict[str, str]
    flag: int = 0


def encode_batch(messages: Iterable[BatchMessage]) -> bytes:
    """The body a client sends for a batch (magic and CRC zero, as clients write them)."""
    out = bytearray()
    for message in messages:
        properties = encode_properties(message.properties)
        if len(properties) > 0x7FFF:
            raise InvalidMessage("properties exceed 32767 bytes")
        body = message.body
        out += ENTRY_HEAD.pack(MIN_ENTRY_SIZE + len(body) + len(properties), 0, 0, message.flag,
                               len(body))
        out += body
        out += PROPS_LEN.pack(len(properties))
        out += properties
    return bytes(out)


def decode_batch(data: bytes | memoryview) -> list[BatchMessage]:
    """The entries of a batch body; bodies are views into `data`. InvalidMessage when an
    entry's lengths do not add up to its totalSize or run past the end."""
    view = memoryview(data)
    end = len(view)
    pos = 0
    messages: list[BatchMessage] = []
    try:
        while pos < end:
            size, _magic, _crc, flag, body_length = ENTRY_HEAD.unpack_from(view, pos)
            properties_at = pos + ENTRY_HEAD.size + body_length
            next_pos = pos + size
            if (body_length < 0 or properties_at + 2 > next_pos or next_pos > end
                    or properties_at + 2 + PROPS_LEN.unpack_from(view, properties_at)[0] != next_pos):
                raise InvalidMessage(f"batch entry at {pos} has inconsistent lengths")
            messages.append(BatchMessage(view[pos + ENTRY_HEAD.size:properties_at],
                                         decode_properties(bytes(view[properties_at + 2:next_pos])),
                                         flag))
            pos = next_pos
    except struct.error:  # fewer bytes left than an entry's head
        raise InvalidMessage(f"batch entry at {pos} is truncated") from None
    return messages
