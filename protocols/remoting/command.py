"""The remoting command: one request or response as both peers see it.

A `RemotingCommand` is the decoded form of a frame: header fields plus an opaque body.
This module defines the record and the request/response helpers around it; it must never
serialize, parse or touch I/O (see `frame` and `connection` for that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from .codes import LanguageCode, SerializeType

# A body as the encoder accepts it: one buffer, or several (e.g. mmap slices of the
# CommitLog for a pull) that are written out one after another without being joined.
Buffer: TypeAlias = bytes | bytearray | memoryview
Body: TypeAlias = Buffer | list[Buffer]

FLAG_RESPONSE = 0x1  # bit 0: the command is a response
FLAG_ONEWAY = 0x2  # bit 1: the request wants no response

# The `version` this codec stamps on commands it creates: RocketMQ 4.9.4's, which peers
# use only to switch on features we do not rely on.
DEFAULT_VERSION = 399


def body_length(body: Body) -> int:
    """Length in bytes of a body given as one buffer or a list of buffers."""
    if isinstance(body, list):
        return sum(memoryview(part).nbytes for part in body)
    return memoryview(body).nbytes


@dataclass(slots=True)
class RemotingCommand:
    """One remoting frame, decoded.

    `ext_fields` always maps strings to strings: the receiving side coerces whatever a
    client sent (numbers, booleans) so that header decoding has one input type. A body
    received from the wire is a read-only memoryview into the received bytes (no copy);
    call `bytes()` on it to keep it beyond the command's life.
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: Body = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True only when the oneway bit is set; real clients often omit it (remoting.md)."""
        return bool(self.flag & FLAG_ONEWAY)


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: Body = b"",
) -> RemotingCommand:
    """Build the response to `request`: same opaque, same serialize type, response bit set.

    The serialize type must follow the request because some clients (ali-ons) read the
    header-length word unmasked and would misparse any other type byte.
    """
    return RemotingCommand(
        code=int(code),
        language=LanguageCode.JAVA,
        version=request.version,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=ext_fields if ext_fields is not None else {},
        body=body,
        serialize_type=request.serialize_type,
    )
