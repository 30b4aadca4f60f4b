"""STOMP frames as bytes: parse one from a buffer, serialize one, escape headers per version.

The grammar is the STOMP 1.2 specification's (``command EOL *(header EOL) EOL body NUL``,
EOL = ``[CR] LF``), read leniently where older versions differ: a CR before LF is dropped
for every version, and header values are unescaped only from 1.1 on (1.0 has no escapes;
1.1 has ``\\n \\c \\\\``; 1.2 adds ``\\r``). CONNECT, STOMP and CONNECTED frames are never
escaped, so their headers are read before a version exists. A body runs to the first NUL,
or for exactly ``content-length`` octets (binary-safe, NULs inside). When a header repeats,
the first one counts.

Limits (header count, header line length, body size) bound what one frame can make the
broker buffer; a frame over them, or one the grammar refuses, is a `FrameError` whose text
goes into the ERROR frame. Nothing here does I/O or keeps state between calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

V10: Final = "1.0"
V11: Final = "1.1"
V12: Final = "1.2"
VERSIONS: Final = (V12, V11, V10)  # best first

CLIENT_COMMANDS: Final = frozenset({
    "CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
    "BEGIN", "COMMIT", "ABORT", "DISCONNECT"})
_UNESCAPED: Final = frozenset({"CONNECT", "STOMP", "CONNECTED"})

DEFAULT_MAX_HEADERS: Final = 1000
DEFAULT_MAX_HEADER_LENGTH: Final = 10 * 1024
DEFAULT_MAX_BODY: Final = 4 << 20


class FrameError(ValueError):
    """A frame the grammar or the limits refuse; the text is what the client is told."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_headers: int = DEFAULT_MAX_HEADERS
    max_header_length: int = DEFAULT_MAX_HEADER_LENGTH  # one header line, in octets
    max_body: int = DEFAULT_MAX_BODY

    @property
    def max_head(self) -> int:
        """Octets a command plus headers may take before the blank line must have come."""
        return (self.max_headers + 2) * (self.max_header_length + 2)


@dataclass(slots=True)
class Frame:
    command: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


# ---------------------------------------------------------------------------- escaping
_ESCAPES_11: Final = {"\\\\": "\\", "\\n": "\n", "\\c": ":"}
_ESCAPES_12: Final = {**_ESCAPES_11, "\\r": "\r"}
_ESCAPE_RE: Final = re.compile(r"\\.?", re.S)
_OUT_11: Final = str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c"})
_OUT_12: Final = str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c", "\r": "\\r"})


def unescape(text: str, version: str) -> str:
    """A received header name or value as meant; an undefined escape is a FrameError."""
    if "\\" not in text or version == V10:
        return text
    table = _ESCAPES_12 if version == V12 else _ESCAPES_11

    def one(match: re.Match[str]) -> str:
        seq = match.group()
        try:
            return table[seq]
        except KeyError:
            raise FrameError(f"undefined escape sequence {seq!r} in a header") from None
    return _ESCAPE_RE.sub(one, text)


def escape(text: str, version: str) -> str:
    if version == V10:
        return text.replace("\n", " ")  # 1.0 cannot carry a newline in a header at all
    return text.translate(_OUT_12 if version == V12 else _OUT_11)


# ---------------------------------------------------------------------------- parsing
def skip_eols(buf: bytes | bytearray, pos: int) -> int:
    """Past the heart-beats (bare EOLs) that may come between frames."""
    end = len(buf)
    while pos < end:
        byte = buf[pos]
        if byte == 0x0A:
            pos += 1
        elif byte == 0x0D and pos + 1 < end and buf[pos + 1] == 0x0A:
            pos += 2
        else:
            break
    return pos


def _head_end(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """(end of the header block, start of the body), or (-1, -1) if the blank line is not
    in the buffer yet."""
    lf = buf.find(b"\n\n", pos)
    # a CRLF blank line counts only before the first LF one: never scan past that (a buffer
    # of pipelined LF-only frames would be scanned to its end for every frame)
    crlf = buf.find(b"\n\r\n", pos, lf + 2 if lf >= 0 else len(buf))
    if crlf >= 0:
        return crlf, crlf + 3
    if lf >= 0:
        return lf, lf + 2
    return -1, -1


Heads = dict[bytes, tuple[str, dict[str, str], int]]
_HEADS_MAX: Final = 16  # distinct command-and-header blocks a connection's cache holds
_HEAD_CACHED_MAX: Final = 512  # octets: longer heads are parsed every time


def parse_frame(buf: bytes | bytearray, pos: int, version: str, limits: Limits,
                heads: Heads | None = None) -> tuple[Frame, int] | None:
    """The frame starting at ``buf[pos]`` (heart-beats already skipped) and the position
    after it, or None when more bytes are needed. Raises FrameError.

    ``heads``: one connection's parsed command-and-header blocks (same version, same
    limits), by their octets. A pipelining client repeats the same block frame after frame;
    a hit skips decoding, splitting and unescaping, and gives the same ``headers`` dict
    again, which callers therefore treat as read-only (and may recognise by identity).
    Bounded (16 blocks of at most 512 octets) so a client sending ever-new headers cannot
    make it grow."""
    head_end, body_start = _head_end(buf, pos)
    if head_end < 0:
        if len(buf) - pos > limits.max_head:
            raise FrameError("the frame's command and headers exceed the size limit")
        if buf.find(b"\0", pos) >= 0:
            raise FrameError("a NUL octet before the end of the headers")
        return None
    if heads is not None and head_end - pos <= _HEAD_CACHED_MAX:
        key = bytes(buf[pos:head_end])
        hit = heads.get(key)
        if hit is None:
            hit = _parse_head(buf, pos, head_end, version, limits)
            if "receipt" not in hit[1]:  # a receipt id is new every time: not worth keeping
                if len(heads) >= _HEADS_MAX:
                    heads.clear()
                heads[key] = hit
    else:
        hit = _parse_head(buf, pos, head_end, version, limits)
    command, headers, length = hit
    if length >= 0:
        end = body_start + length
        if len(buf) <= end:
            return None
        if buf[end] != 0:
            raise FrameError("the body does not end with NUL after content-length octets")
    else:
        end = buf.find(b"\0", body_start)
        if end < 0:
            if len(buf) - body_start > limits.max_body:
                raise FrameError(_too_large(len(buf) - body_start, limits.max_body, more=True))
            return None
        if end - body_start > limits.max_body:
            raise FrameError(_too_large(end - body_start, limits.max_body))
    return Frame(command, headers, bytes(buf[body_start:end])), end + 1


def _parse_head(buf: bytes | bytearray, pos: int, head_end: int, version: str,
                limits: Limits) -> tuple[str, dict[str, str], int]:
    """(command, headers, content-length or -1) of the block ``buf[pos:head_end]``."""
    if head_end - pos > limits.max_head:
        raise FrameError("the frame's command and headers exceed the size limit")
    try:
        head = buf[pos:head_end].decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("the frame's command and headers are not UTF-8") from None
    if "\r" in head:  # CRLF line ends (the last line's CR precedes the blank line's)
        head = head.replace("\r\n", "\n").removesuffix("\r")
    lines = head.split("\n")
    command = lines[0]
    if command not in CLIENT_COMMANDS:
        raise FrameError(f"unknown command {command[:64]!r}")
    if len(lines) - 1 > limits.max_headers:
        raise FrameError(f"more than {limits.max_headers} headers")
    if "\0" in head:
        raise FrameError("a NUL octet in a header")
    # the checks below are per line only when the head as a whole could fail them: a
    # pipelined SEND's few short headers cost a partition and a dict insert each
    long_lines = head_end - pos > limits.max_header_length
    unescaping = "\\" in head and version != V10 and command not in _UNESCAPED
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if long_lines and len(line) > limits.max_header_length:
            raise FrameError(f"a header line longer than {limits.max_header_length} octets")
        name, sep, value = line.partition(":")
        if not sep:
            raise FrameError(f"a header line without ':' ({line[:64]!r})")
        if unescaping:
            name, value = unescape(name, version), unescape(value, version)
        if name not in headers:  # repeated: the first one counts
            headers[name] = value
    length_text = headers.get("content-length")
    if length_text is None:
        return command, headers, -1
    length_text = length_text.strip()
    if not length_text.isdigit() or not length_text.isascii():
        raise FrameError(f"content-length {length_text[:32]!r} is not a non-negative integer")
    length = int(length_text)
    if length > limits.max_body:
        raise FrameError(_too_large(length, limits.max_body))
    return command, headers, length


def _too_large(size: int, limit: int, more: bool = False) -> str:
    """RabbitMQ's words for a message over max_message_size (``more``: at least ``size``)."""
    return (f"PRECONDITION_FAILED - message size {size}{' or more' if more else ''} is larger "
            f"than configured max size {limit}")


# ---------------------------------------------------------------------------- writing
def serialize(command: str, headers: dict[str, str] | list[tuple[str, str]], body: bytes,
              version: str) -> bytes:
    """One frame's bytes; header names and values escaped as ``version`` says."""
    items = headers.items() if isinstance(headers, dict) else headers
    lines = [f"{k}:{v}" for k, v in items]
    head = "\n".join(lines)
    if command not in _UNESCAPED and (
            "\\" in head or "\r" in head or head.count(":") != len(lines)
            or head.count("\n") != len(lines) - 1):
        # something to escape (rare): each name and value on its own; else one C-speed
        # scan of the joined text spared a call per name and value
        head = "\n".join(f"{escape(k, version)}:{escape(v, version)}" for k, v in items)
    text = f"{command}\n{head}\n\n" if lines else f"{command}\n\n"
    return b"".join((text.encode("utf-8", "surrogateescape"), body, b"\0"))
