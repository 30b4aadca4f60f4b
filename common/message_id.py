"""Message ids: RocketMQ's offsetMsgId (store host + commit-log offset, uppercase hex).

Clients decode an offsetMsgId to name a message by its commit-log offset (END_TRANSACTION,
queryMsgById), so the broker must turn one back into that offset. The client's unique id
(``UNIQ_KEY``) is opaque and found through the index instead; `MessageClientIdGenerator`
makes them in RocketMQ's client layout (the native client's). No I/O.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import socket
import struct
import time
from collections.abc import Callable
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


# --- client unique ids (UNIQ_KEY) ------------------------------------------------------------


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """[start, next start) of the local calendar month containing `now_ms`, in ms."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + datetime.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


class MessageClientIdGenerator:
    """Unique ids laid out as MessageClientIDSetter.createUniqID makes them.

    16 bytes as 32 uppercase hex digits (28 / 56 for an IPv6 host): ip, pid (u16),
    seed (i32), milliseconds since the start of the month (i32), counter (u16). Brokers
    treat the id as opaque; using the same layout keeps tools that decode it working.
    """

    def __init__(
        self,
        ip: str = "127.0.0.1",
        pid: int | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        pid = os.getpid() if pid is None else pid
        seed = id(self) if seed is None else seed
        self._prefix = (
            ipaddress.ip_address(ip).packed + struct.pack(">H", pid & 0xFFFF)
            + struct.pack(">I", seed & 0xFFFFFFFF)
        ).hex().upper()
        self._clock = clock
        self._counter = itertools.count()
        self._month_start, self._next_month_start = _month_start_ms(int(clock() * 1000))

    def next_id(self) -> str:
        return self.next_ids(1)[0]

    def next_ids(self, count: int) -> list[str]:
        """`count` ids stamped with one clock reading (a batch send's messages)."""
        head, first = self.next_id_run(count)
        return ["%s%04X" % (head, (first + i) & 0xFFFF) for i in range(count)]

    def next_id_run(self, count: int) -> tuple[str, int]:
        """`count` ids as (head, first counter): id i is ``head + "%04X" % ((first + i) &
        0xFFFF)``. For writers that format many ids at once (columns, not strings)."""
        now = int(self._clock() * 1000)
        if now >= self._next_month_start:
            self._month_start, self._next_month_start = _month_start_ms(now)
        elapsed = now - self._month_start
        if -1_000_000 < elapsed < 0:  # clock stepped back (NTP): as Java does, clamp
            elapsed = 0
        first = next(self._counter)
        if count > 1:  # the counter moves past the run
            self._counter = itertools.count(first + count)
        return "%s%08X" % (self._prefix, elapsed & 0xFFFFFFFF), first & 0xFFFF
