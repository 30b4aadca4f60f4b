"""Message ids: RocketMQ's offsetMsgId (store host + commit-log offset, uppercase hex).

Clients decode an offsetMsgId to name a message by its commit-log offset (END_TRANSACTION,
queryMsgById), so the broker must turn one back into that offset. The client's unique id
(``UNIQ_KEY``) is opaque and found through the index instead. Pure functions, no I/O.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from .errors import MessageNotFound

OFFSET_MSG_ID_HEX_LENGTH = 32  # IPv4 (4) + port (4) + offset (8) bytes, as hex


@dataclass(slots=True, frozen=True)
class OffsetMsgId:
    host: str
    port: int
    commit_log_offset: int


def offset_msg_id(store_host: bytes, commit_log_offset: int) -> str:
    """From the 8 store-host bytes (IPv4 address + port) as records carry them."""
    return (store_host + commit_log_offset.to_bytes(8, "big")).hex().upper()


def offset_msg_id_template(store_host: bytes) -> bytes:
    """``template % commit_log_offset`` is `offset_msg_id`'s text as bytes: one format per
    message where many ids share a store host (send responses, batch results)."""
    return store_host.hex().upper().encode() + b"%016X"


def encode_offset_msg_id(host: str, port: int, commit_log_offset: int) -> str:
    return offset_msg_id(socket.inet_aton(host) + port.to_bytes(4, "big"), commit_log_offset)


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Raises MessageNotFound for anything that is not a 32-hex-digit IPv4 offsetMsgId."""
    if len(msg_id) != OFFSET_MSG_ID_HEX_LENGTH:
        raise MessageNotFound(f"{msg_id!r} is not an offset message id")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageNotFound(f"{msg_id!r} is not an offset message id") from None
    return OffsetMsgId(socket.inet_ntoa(raw[:4]), int.from_bytes(raw[4:8], "big"),
                       int.from_bytes(raw[8:], "big"))
