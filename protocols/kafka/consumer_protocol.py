"""The consumer protocol a classic group carries opaquely: subscriptions and assignments.

A classic group's members put their subscription (ConsumerProtocolSubscription v0-3) in
JoinGroup's protocol metadata and receive their partitions (ConsumerProtocolAssignment
v0-3) in SyncGroup's assignment bytes. The broker never reads them in a classic group; it
must once a classic group moves to KIP-848's consumer protocol (online migration): the
members' subscriptions and current partitions become the consumer group's state, and the
broker hands classic members the assignments it computes. Sans-IO; bad bytes raise
:class:`ConsumerProtocolError`. Versions above 3 are read as 3, as Kafka reads them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from .assignors import Assignment

MAX_VERSION: Final = 3
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """Metadata or assignment bytes that are not the consumer protocol."""


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: Assignment = field(default_factory=dict)  # v1+: the partitions the member still holds
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerProtocolError("truncated consumer protocol bytes")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError:
            raise ConsumerProtocolError("a string is not UTF-8") from None

    def skip_bytes(self) -> None:
        n = self.i32()
        if n != -1:
            self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data):  # every element takes at least one byte
            raise ConsumerProtocolError("bad array length")
        return n

    def partitions(self) -> Assignment:
        out: Assignment = {}
        for _ in range(self.count()):
            topic = self.string()
            assert topic is not None
            out.setdefault(topic, set()).update(self.i32() for _ in range(self.count()))
        return out


def parse_subscription(data: bytes) -> Subscription:
    """A JoinGroup protocol's metadata."""
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"bad consumer protocol version {version}")
    topics = [t for t in (r.string() for _ in range(r.count())) if t is not None]
    r.skip_bytes()  # user data: the client-side assignor's, of no use to the broker's
    sub = Subscription(version, topics)
    if version >= 1:
        sub.owned = r.partitions()
    if version >= 2:
        sub.generation_id = r.i32()
    if version >= 3:
        sub.rack_id = r.string(nullable=True)
    return sub


def parse_assignment(data: bytes) -> Assignment:
    """A SyncGroup assignment (empty bytes: nothing assigned)."""
    if not data:
        return {}
    r = _Reader(data)
    if r.i16() < 0:
        raise ConsumerProtocolError("bad consumer protocol version")
    return r.partitions()


def protocol_version(metadata: bytes) -> int:
    """The consumer protocol version a member speaks (its metadata's first field), at most 3."""
    if len(metadata) < 2:
        return 0
    return max(0, min(MAX_VERSION, _I16.unpack_from(metadata)[0]))


def encode_assignment(assignment: Assignment, version: int) -> bytes:
    """ConsumerProtocolAssignment at ``version``: the partitions, no user data."""
    out = [_I16.pack(version), _I32.pack(sum(1 for ps in assignment.values() if ps))]
    for topic, parts in sorted(assignment.items()):
        if not parts:
            continue
        name = topic.encode()
        out += [_I16.pack(len(name)), name, _I32.pack(len(parts))]
        out += [_I32.pack(p) for p in sorted(parts)]
    out.append(_I32.pack(-1))  # null user data
    return b"".join(out)
