"""Byte layout of a remoting frame: encoder and header decoders for both serialize types.

A frame is `total length (i32) | serialize type << 24 | header length (i32) | header |
body`, big-endian, where the total counts everything after itself. The header is JSON
(type 0, what every observed client sends) or RocketMQ's binary layout (type 1):

    code i16, language u8, version i16, opaque i32, flag i32,
    remark length i32 + UTF-8, extFields length i32 +
        repeated (key length i16 + UTF-8, value length i32 + UTF-8)

Encoding returns a list of buffers so that a session can `writelines` a pull response
whose body is a list of CommitLog slices without joining them. This module is pure data
transformation: it must never import asyncio or sockets, and the decoders must never
raise anything but `FrameError` whatever the bytes.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import orjson

from .codes import LanguageCode, SerializeType
from .command import FLAG_RESPONSE, Buffer, RemotingCommand

# RocketMQ's `com.rocketmq.remoting.frameMaxLength` default: its Netty decoder refuses
# a frame longer than this. We accept the same plus 64 KiB of headroom so that a client
# tuned right at RocketMQ's limit (a 16 MiB body plus its header) still gets through.
ROCKETMQ_FRAME_MAX_LENGTH = 16 * 1024 * 1024
DEFAULT_MAX_FRAME_LENGTH = ROCKETMQ_FRAME_MAX_LENGTH + 64 * 1024

MAX_HEADER_LENGTH = 0xFFFFFF  # the header length has 24 bits
# extFields entries a header may carry. A request header has a few dozen at most (message
# properties travel in one of them), but a 16 MiB binary header holds a million empty
# ones, which took 2.2 s to decode on the event loop; past this a frame is refused.
MAX_EXT_FIELDS = 4096
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

LENGTH = struct.Struct(">i")
PREFIX = struct.Struct(">iI")  # total length, serialize type << 24 | header length
_BIN_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_BIN_FIXED_SIZE = _BIN_FIXED.size  # 13
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

_LANGUAGE_BY_NAME = {member.name: member for member in LanguageCode}
_LANGUAGE_BY_VALUE = {member.value: member for member in LanguageCode}
_OTHER = LanguageCode.OTHER
_OPAQUE_IN_BROKEN_JSON = re.compile(rb'"opaque"\s*:\s*"?(-?\d{1,10})')


class FrameError(Exception):
    """A frame whose header cannot be decoded; `opaque` is set when it could be read."""

    def __init__(self, reason: str, opaque: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.opaque = opaque


# --- encoding ----------------------------------------------------------------------------


def encode_command(command: RemotingCommand) -> list[Buffer]:
    """Serialize `command` into buffers to write in order; the body is not copied.

    The header is serialized in `command.serialize_type`. Raises ValueError for a command
    that cannot be represented (header over 16 MiB, frame over 2 GiB, binary header fields
    out of their i16 range).
    """
    if command.serialize_type == SerializeType.ROCKETMQ:
        header = encode_rocketmq_header(command)
    else:
        header = encode_json_header(command)
    header_length = len(header)
    if header_length > MAX_HEADER_LENGTH:
        raise ValueError(f"header of {header_length} bytes exceeds the 24-bit length")
    body = command.body
    if isinstance(body, list):
        parts = [part for part in body if len(part)]
        body_size = sum(memoryview(part).nbytes for part in parts)
    else:
        parts = [body] if len(body) else []
        body_size = memoryview(body).nbytes
    total = 4 + header_length + body_size
    if total > _INT32_MAX:
        raise ValueError(f"frame of {total} bytes exceeds the i32 length field")
    word = (int(command.serialize_type) << 24) | header_length
    return [PREFIX.pack(total, word) + header, *parts]


def encode_json_header(command: RemotingCommand) -> bytes:
    """Strict JSON with fastjson's key order, as RocketMQ's own broker emits it."""
    header: dict[str, Any] = {
        "code": command.code,
        "extFields": command.ext_fields,
        "flag": command.flag,
        "language": _language_name(command.language),
        "opaque": command.opaque,
    }
    if command.remark is not None:
        header["remark"] = command.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = command.version
    return orjson.dumps(header)


_SLOTS = {bytes: "\x00s\x00", int: "\x00d\x00"}  # orjson escapes NUL: no clash with content
_OPAQUE_MARK, _VERSION_MARK = -2147483647, -2147483646


class JsonFrameTemplate:
    """A JSON-header frame compiled once, filled by %-formatting per use.

    The template is `encode_json_header`'s own output for placeholder values, so the keys,
    their order and the fixed values are exactly what the general encoder writes; only
    the slots (extFields given as `bytes` or `int` instead of a value), opaque and
    version vary. Building a send's response this way costs a fraction of a command plus
    `orjson.dumps` (a response by default; ``flag=0`` makes requests, as load generators do).
    """

    __slots__ = ("_text",)

    def __init__(self, code: int, ext_fields: dict[str, str | type], *, flag: int = FLAG_RESPONSE) -> None:
        header = encode_json_header(RemotingCommand(
            code, LanguageCode.JAVA, _VERSION_MARK, _OPAQUE_MARK, flag, None,
            {k: _SLOTS[v] if isinstance(v, type) else v for k, v in ext_fields.items()}))
        text = header.replace(b"%", b"%%")
        for kind, slot in _SLOTS.items():
            text = text.replace(orjson.dumps(slot), b'"%s"' if kind is bytes else b'"%d"')
        self._text = (text.replace(b'"opaque":%d' % _OPAQUE_MARK, b'"opaque":%d')
                      .replace(b'"version":%d' % _VERSION_MARK, b'"version":%d'))

    def frame(self, opaque: int, version: int, *values: bytes | int, body_size: int = 0) -> bytes:
        """The frame up to its body (prefix and header) with the slots set, in order;
        `body_size` bytes of body must follow it.

        Byte values go in verbatim (UTF-8): pass any text a client chose through `json_text`.
        """
        header = self._text % (*values, opaque, version)
        return PREFIX.pack(4 + len(header) + body_size, len(header)) + header


def json_text(value: bytes) -> bytes:
    """UTF-8 `value` escaped for the inside of a JSON string (unchanged when alphanumeric
    ASCII); invalid UTF-8 is replaced, as a JSON string cannot carry it."""
    return value if value.isalnum() else orjson.dumps(value.decode("utf-8", "replace"))[1:-1]


def encode_rocketmq_header(command: RemotingCommand) -> bytes:
    """RocketMQ's binary header layout; entries whose key or value is None are skipped."""
    try:
        fixed = _BIN_FIXED.pack(
            command.code, int(command.language), command.version, command.opaque, command.flag
        )
    except struct.error as exc:
        raise ValueError(f"command does not fit the binary header: {exc}") from None
    out = bytearray(fixed)
    remark = command.remark.encode("utf-8") if command.remark else b""
    out += _I32.pack(len(remark))
    out += remark
    ext = bytearray()
    for key, value in command.ext_fields.items():
        if key is None or value is None:
            continue
        key_bytes = str(key).encode("utf-8")
        value_bytes = str(value).encode("utf-8")
        ext += _I16.pack(len(key_bytes))
        ext += key_bytes
        ext += _I32.pack(len(value_bytes))
        ext += value_bytes
    out += _I32.pack(len(ext))
    out += ext
    return bytes(out)


def _language_name(language: LanguageCode | int) -> str:
    member = _LANGUAGE_BY_VALUE.get(int(language))
    return member.name if member is not None else LanguageCode.OTHER.name


# --- decoding ----------------------------------------------------------------------------


def decode_json_header(header: memoryview) -> RemotingCommand:
    """Decode a JSON header into a command without body; raises only FrameError."""
    return command_from_json(load_json_header(header))


def load_json_header(header: memoryview) -> dict[str, Any]:
    """The JSON header as a dict, unchecked (see `command_from_json`); raises FrameError.

    Split from the checks so a session can offer the dict to a handler's fast path
    (`RequestHandler.send_lane`) before building a command. Two checks are made here: a
    `code` that is an array or object (no command has one) is refused, as `command_from_json`
    would refuse it, because fast paths look their code up in tables and must be able to
    hash it; and more than MAX_EXT_FIELDS extFields are refused, as in binary headers."""
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError:
        raise FrameError("header is not valid JSON", _scan_opaque(header)) from None
    if type(obj) is not dict:
        raise FrameError(f"header is a JSON {type(obj).__name__}, not an object")
    code = obj.get("code")
    ext = obj.get("extFields")
    if type(code) is list or type(code) is dict:
        raise FrameError("header field 'code' is not an integer", _opaque_of(obj))
    if type(ext) is dict and len(ext) > MAX_EXT_FIELDS:
        raise FrameError(f"header has more than {MAX_EXT_FIELDS} extFields", _opaque_of(obj))
    return obj


def _opaque_of(obj: dict[str, Any]) -> int | None:
    try:
        return _coerce_int32(obj.get("opaque", 0), "opaque", None)
    except FrameError:
        return None


def command_from_json(obj: dict[str, Any]) -> RemotingCommand:
    """The command a loaded JSON header describes; raises only FrameError.

    Tolerant where clients differ: missing optional keys take RocketMQ's defaults,
    extFields values may be strings, numbers, booleans or null (coerced to strings, null
    dropped), integers may arrive as decimal strings, unknown languages become OTHER.
    The first branch is the hot path every well-behaved client takes; anything unusual
    falls through to `_decode_json_header_slowly`, which coerces or names the bad field.
    """
    get = obj.get
    code = get("code")
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    language = get("language", "JAVA")
    remark = get("remark")
    ext = get("extFields")
    if (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and type(language) is str
        and type(ext) is dict
        and (remark is None or type(remark) is str)
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
    ):
        for value in ext.values():
            if type(value) is not str:
                ext = _coerce_ext_fields(ext, opaque)
                break
        return RemotingCommand(
            code, _LANGUAGE_BY_NAME.get(language, _OTHER), version, opaque, flag, remark, ext
        )
    return _decode_json_header_slowly(obj)


def _decode_json_header_slowly(obj: dict[str, Any]) -> RemotingCommand:
    opaque = _coerce_int32(obj.get("opaque", 0), "opaque", None)
    code = obj.get("code")
    if code is None:
        raise FrameError("header has no 'code'", opaque)
    code = _coerce_int32(code, "code", opaque)
    flag = _coerce_int32(obj.get("flag", 0), "flag", opaque)
    version = _coerce_int32(obj.get("version", 0), "version", opaque)
    language = _coerce_language(obj.get("language"), opaque)
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        remark = _coerce_scalar(remark, "remark", opaque)
    ext = obj.get("extFields")
    if ext is None:
        ext = {}
    elif type(ext) is not dict:
        raise FrameError("header field 'extFields' is not an object", opaque)
    else:
        ext = _coerce_ext_fields(ext, opaque)
    return RemotingCommand(code, language, version, opaque, flag, remark, ext)


def decode_rocketmq_header(header: memoryview) -> RemotingCommand:
    """Decode RocketMQ's binary header into a command without body; raises only FrameError.

    Strings are UTF-8 with invalid sequences replaced (as Netty's readCharSequence does);
    an empty remark reads as None, as in RocketMQ; bytes after the extFields are ignored.
    """
    size = len(header)
    if size < _BIN_FIXED_SIZE + 8:
        opaque = _I32.unpack_from(header, 5)[0] if size >= 9 else None
        raise FrameError(f"binary header of {size} bytes is too short", opaque)
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(header, 0)
    pos = _BIN_FIXED_SIZE
    remark_length = _I32.unpack_from(header, pos)[0]
    pos += 4
    if remark_length < 0 or remark_length > size - pos - 4:
        raise FrameError(f"binary header remark length {remark_length} is out of range", opaque)
    remark = str(header[pos : pos + remark_length], "utf-8", "replace") if remark_length else None
    pos += remark_length
    ext_length = _I32.unpack_from(header, pos)[0]
    pos += 4
    if ext_length < 0 or ext_length > size - pos:
        raise FrameError(f"binary header extFields length {ext_length} is out of range", opaque)
    ext: dict[str, str] = {}
    end = pos + ext_length
    entries = 0  # not len(ext): repeated and empty keys cost as much to read
    while pos < end:
        entries += 1
        if entries > MAX_EXT_FIELDS:
            raise FrameError(f"header has more than {MAX_EXT_FIELDS} extFields", opaque)
        if end - pos < 2:
            raise FrameError("binary header extFields entry is truncated", opaque)
        key_length = _I16.unpack_from(header, pos)[0]
        pos += 2
        if key_length < 0 or end - pos < key_length + 4:
            raise FrameError("binary header extFields key is truncated", opaque)
        key = str(header[pos : pos + key_length], "utf-8", "replace")
        pos += key_length
        value_length = _I32.unpack_from(header, pos)[0]
        pos += 4
        if value_length < 0 or end - pos < value_length:
            raise FrameError("binary header extFields value is truncated", opaque)
        if key:
            ext[key] = str(header[pos : pos + value_length], "utf-8", "replace")
        pos += value_length
    return RemotingCommand(
        code,
        _LANGUAGE_BY_VALUE.get(language, LanguageCode.OTHER),
        version,
        opaque,
        flag,
        remark,
        ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _scan_opaque(header: memoryview) -> int | None:
    """Find the opaque in a header that is not valid JSON, so the error can be answered."""
    match = _OPAQUE_IN_BROKEN_JSON.search(header)
    if match is None:
        return None
    value = int(match.group(1))
    return value if _INT32_MIN <= value <= _INT32_MAX else None


def _coerce_int32(value: object, name: str, opaque: int | None) -> int:
    if type(value) is str:
        try:
            number = int(value.strip())
        except ValueError:
            raise FrameError(f"header field {name!r} is not an integer", opaque) from None
    elif type(value) is int:
        number = value
    elif type(value) is float and value.is_integer():
        number = int(value)
    else:
        raise FrameError(f"header field {name!r} is not an integer", opaque)
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise FrameError(f"header field {name!r} is out of the i32 range", opaque)
    return number


def _coerce_language(value: object, opaque: int | None) -> LanguageCode:
    if value is None:
        return LanguageCode.JAVA
    if type(value) is str:
        return _LANGUAGE_BY_NAME.get(value, _OTHER)
    if type(value) is int:
        return _LANGUAGE_BY_VALUE.get(value, LanguageCode.OTHER)
    raise FrameError("header field 'language' is neither a name nor a number", opaque)


def _coerce_scalar(value: object, name: str, opaque: int | None) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int or type(value) is float:
        return str(value)
    raise FrameError(f"header field {name!r} is not a string", opaque)


def _coerce_ext_fields(ext: dict[str, Any], opaque: int | None) -> dict[str, str]:
    coerced: dict[str, str] = {}
    for key, value in ext.items():
        if type(value) is str:
            coerced[key] = value
        elif value is not None:
            coerced[key] = _coerce_scalar(value, f"extFields.{key}", opaque)
    return coerced
