"""One encoder/decoder engine for every Kafka API and version declared in ``schema/``.

Each (API, version, direction) is compiled once into a plan of reader and writer closures
and a generated read/write function per struct, so decoding and encoding cost O(fields): a
``records`` field is returned as a memoryview slice of the frame and written as the
caller's buffers, never copied or parsed here (record batches belong to
``rocketport.common.batch``). Messages are plain dicts keyed by the snake_case
field names of the schema; fields a version lacks decode to their defaults and are ignored
on encode, so handlers read and write one shape for every version.

Encoders return a list of buffers: small parts joined, large blobs (records) passed through,
ready for ``writelines`` without copying. Emitted tagged-field sections stay empty unless a
caller sets a tagged field to a non-default value (old librdkafka misreads non-empty ones).

This module is sans-IO: it must never import asyncio or sockets, nor keep state between
calls beyond its compiled plans.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field
from functools import cache
from typing import Any, Final

from .schema import APIS, Api, ApiKey, Field
from .schema._dsl import MISSING

__all__ = [
    "PASS_THROUGH",
    "Buffer",
    "DecodeError",
    "Encoded",
    "MAX_REQUEST_ITEMS",
    "RequestHeader",
    "UnsupportedApi",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "decode_response_header",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "is_supported",
    "item_encoder",
    "request_header_version",
    "response_header_version",
    "supported_versions",
]

Buffer = bytes | bytearray | memoryview
Message = dict[str, Any]
_Reader = Callable[[memoryview, int], tuple[Any, int]]
_Writer = Callable[[list, Any], None]

# Parts at least this long are passed through to the caller instead of being joined.
PASS_THROUGH: Final = 16 * 1024
_ZERO_UUID: Final = bytes(16)
_INT_TYPES: Final = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_I16: Final = _INT_TYPES["int16"]
_I32: Final = _INT_TYPES["int32"]
_HEADER_FIXED: Final = struct.Struct(">hhi")  # api key, api version, correlation id


class DecodeError(ValueError):
    """Bytes that do not form the declared message: truncated, bad lengths, bad UTF-8."""


# A request may hold at most this many array items and tagged fields in all. Bytes alone
# do not bound the work: an item can be two bytes, so a 2 MB Metadata request named a
# million topics and held the event loop 7 s (a 100 MiB one, minutes and gigabytes).
# The largest real requests (a consumer fetching or committing every partition it owns)
# hold thousands. Responses, which only our own clients decode, are not limited.
MAX_REQUEST_ITEMS: Final = 100_000


class _Budget(threading.local):
    """Array items (and tagged fields) the request being decoded on this thread may still
    hold; negative for no limit (set by each decode_request and decode_response)."""

    left = -1


_BUDGET: Final = _Budget()


def _over_budget() -> DecodeError:
    return DecodeError(f"request holds more than {MAX_REQUEST_ITEMS} array items and tagged fields")


class UnsupportedApi(KeyError):
    """An API key or version this broker does not serve."""


# --- versions --------------------------------------------------------------------------------


def _parse_range(spec: str) -> tuple[int, int]:
    if spec == "none":
        return (1, 0)  # empty
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    low, _, high = spec.partition("-")
    return (int(low), int(high) if high else int(low))


def _in(spec: str, version: int) -> bool:
    low, high = _parse_range(spec)
    return low <= version <= high


def supported_versions() -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} of every API the codec can read and write."""
    return {key: api.versions for key, api in APIS.items()}


def is_supported(api_key: int, api_version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and api.versions[0] <= api_version <= api.versions[1]


def _api(api_key: int, api_version: int) -> Api:
    api = APIS.get(api_key)
    if api is None or not api.versions[0] <= api_version <= api.versions[1]:
        raise UnsupportedApi(f"api key {api_key} version {api_version} is not served")
    return api


def _is_flexible(api: Api, api_version: int) -> bool:
    return api.flexible is not None and api_version >= api.flexible


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions, else 1; a version above the served range still parses (ApiVersions)."""
    api = APIS.get(api_key)
    if api is not None and api.flexible is not None and api_version >= api.flexible:
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions always answers with header v0 (clients
    parse its header before they know the version)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if _is_flexible(_api(api_key, api_version), api_version) else 0


# --- primitive readers -----------------------------------------------------------------------


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS: Final = tuple(bytes((i,)) for i in range(0x80))


def _fixed_reader(st: struct.Struct) -> _Reader:
    unpack = st.unpack_from
    size = st.size

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return read


def _read_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _read_uuid(buf: memoryview, pos: int) -> tuple[bytes, int]:
    end = pos + 16
    if end > len(buf):
        raise DecodeError("truncated uuid")
    return bytes(buf[pos:end]), end


def _length_reader(compact: bool) -> _Reader:
    """Reads a length prefix as Kafka stores it: -1 (or compact 0) means null."""
    if compact:

        def read(buf: memoryview, pos: int) -> tuple[int, int]:
            n, pos = _read_uvarint(buf, pos)
            return n - 1, pos

        return read

    def read_classic(buf: memoryview, pos: int) -> tuple[int, int]:
        return _I32.unpack_from(buf, pos)[0], pos + 4

    return read_classic


def _blob_reader(kind: str, compact: bool, nullable: bool) -> _Reader:
    """string (-> str), bytes (-> bytes) or records (-> memoryview into the frame)."""
    if compact or kind != "string":
        read_len = _length_reader(compact)
    else:

        def read_len(buf: memoryview, pos: int) -> tuple[int, int]:
            return _I16.unpack_from(buf, pos)[0], pos + 2

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid {kind} length {n}")
        end = pos + n
        if end > len(buf):
            raise DecodeError(f"{kind} of {n} bytes overruns the message")
        if kind == "string":
            return str(buf[pos:end], "utf-8"), end
        if kind == "bytes":
            return bytes(buf[pos:end]), end
        return buf[pos:end], end

    return read


def _array_reader(item: _Reader, compact: bool, nullable: bool) -> _Reader:
    read_len = _length_reader(compact)
    budget = _BUDGET

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid array length {n}")
        if n > len(buf) - pos:  # every item takes at least one byte: bounds hostile counts
            raise DecodeError(f"array of {n} items overruns the message")
        if n:
            left = budget.left  # inline: this runs for every array of every request
            if left >= 0:
                if left < n:
                    raise _over_budget()
                budget.left = left - n
        out = []
        append = out.append
        for _ in range(n):
            value, pos = item(buf, pos)
            append(value)
        return out, pos

    return read


# --- primitive writers -----------------------------------------------------------------------


def _fixed_writer(st: struct.Struct) -> _Writer:
    pack = st.pack

    def write(out: list, value: Any) -> None:
        out.append(pack(value))

    return write


def _write_bool(out: list, value: Any) -> None:
    out.append(b"\x01" if value else b"\x00")


def _write_uuid(out: list, value: Any) -> None:
    if len(value) != 16:
        raise ValueError("a uuid field takes 16 raw bytes")
    out.append(bytes(value))


def _length_writer(compact: bool) -> Callable[[int], bytes]:
    if compact:
        return lambda n: _uvarint(n + 1)
    return _I32.pack


def _blob_writer(kind: str, compact: bool, nullable: bool, name: str) -> _Writer:
    length = _length_writer(compact) if compact or kind != "string" else _I16.pack

    def write(out: list, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ValueError(f"{name} is not nullable in this version")
            out.append(length(-1))
        elif kind == "string":
            data = value.encode("utf-8")
            out.append(length(len(data)))
            out.append(data)
        elif kind == "records" and isinstance(value, (list, tuple)):
            out.append(length(sum(len(part) for part in value)))
            out.extend(value)
        else:
            out.append(length(len(value)))
            out.append(value)

    return write


class Encoded(bytes):
    """An array item already encoded at the answer's version (see item_encoder): written
    as it is. Metadata of every topic keeps each topic's part so (protocols/kafka/cluster.py)."""

    __slots__ = ()


def _array_writer(item: _Writer, compact: bool, nullable: bool, name: str) -> _Writer:
    length = _length_writer(compact)

    def write(out: list, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ValueError(f"{name} is not nullable in this version")
            out.append(length(-1))
            return
        out.append(length(len(value)))
        for element in value:
            if element.__class__ is Encoded:
                out.append(element)
            else:
                item(out, element)

    return write


# --- structs ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _StructPlan:
    """A struct at one version: what to read/write in order, tagged fields, defaults.

    ``read`` and ``write`` are generated per plan (see _generate): straight-line code with
    runs of fixed-size integer fields read and written by one struct each. The generic
    loop over reader and writer closures cost ~1.4x as much (Produce v9 request decode plus
    response encode: 16.3 vs 11.3 us here), paid on every small request.
    """

    fields: tuple[tuple[str, _Reader, _Writer, Any, struct.Struct | None], ...]
    tagged: dict[int, tuple[str, _Reader, Any]]
    tagged_out: tuple[tuple[int, str, _Writer, Any], ...]
    absent: tuple[tuple[str, Any], ...]  # fields of other versions: defaults on decode
    flexible: bool
    read: Callable[[memoryview, int], tuple[Message, int]] = dc_field(init=False, repr=False, compare=False)
    write: Callable[[list, Message], None] = dc_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.read, self.write = _generate(self)

    def _read_tagged(self, buf: memoryview, pos: int, out: Message) -> int:
        known = self.tagged
        for name, _, default in known.values():
            out[name] = _fresh(default)
        count, pos = _read_uvarint(buf, pos)
        left = _BUDGET.left
        if left >= 0:
            if left < count:
                raise _over_budget()
            _BUDGET.left = left - count
        for _ in range(count):
            tag, pos = _read_uvarint(buf, pos)
            size, pos = _read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise DecodeError(f"tagged field {tag} overruns the message")
            entry = known.get(tag)
            if entry is not None:  # unknown tags are skipped, as the spec requires
                name, read, _ = entry
                out[name], used = read(buf[:end], pos)
                if used != end:
                    raise DecodeError(f"tagged field {tag} declares {size} bytes, holds {used - pos}")
            pos = end
        return pos

    def _write_tagged(self, out: list, message: Message) -> None:
        sections = []
        for tag, name, write, default in self.tagged_out:
            value = message.get(name, MISSING)
            if value is MISSING or value == default:
                continue
            body: list = []
            write(body, value)
            data = b"".join(body)
            sections.append(_uvarint(tag) + _uvarint(len(data)) + data)
        out.append(_uvarint(len(sections)))
        out.extend(sections)


_IMMUTABLE: Final = (int, float, str, bytes, bool, type(None))


def _generate(plan: _StructPlan) -> tuple[Callable, Callable]:
    """Compile a plan's read and write functions from Python source (as dataclasses does)."""
    env: dict[str, Any] = {"MISSING": MISSING, "fresh": _fresh, "plan": plan}
    runs: list[list[int]] = []  # consecutive fixed-size integer fields share one struct
    for i, entry in enumerate(plan.fields):
        if i and entry[4] is not None and plan.fields[i - 1][4] is not None:
            runs[-1].append(i)
        else:
            runs.append([i])
    rd = ["def read(buf, pos):"]
    wr = ["def write(out, message):", "    get = message.get"]
    for i, (name, read, write, default, _) in enumerate(plan.fields):
        env[f"R{i}"], env[f"W{i}"], env[f"D{i}"] = read, write, default
        missing = f"D{i}" if isinstance(default, _IMMUTABLE) else f"fresh(D{i})"
        wr += [f"    v{i} = get({name!r}, MISSING)", f"    if v{i} is MISSING:", f"        v{i} = {missing}"]
    for k, run in enumerate(runs):
        names = ", ".join(f"v{i}" for i in run)
        if plan.fields[run[0]][4] is None:
            rd.append(f"    v{run[0]}, pos = R{run[0]}(buf, pos)")
            wr.append(f"    W{run[0]}(out, v{run[0]})")
            continue
        st = struct.Struct(">" + "".join(plan.fields[i][4].format.lstrip(">") for i in run))
        env[f"U{k}"], env[f"P{k}"] = st.unpack_from, st.pack
        rd += [f"    {names}, = U{k}(buf, pos)", f"    pos += {st.size}"]
        wr.append(f"    out.append(P{k}({names}))")
    rd.append("    out = {" + ", ".join(f"{e[0]!r}: v{i}" for i, e in enumerate(plan.fields)) + "}")
    if plan.flexible:
        # the common case, no tagged fields present, inline: one byte read or written
        rd += ["    if buf[pos]:", "        pos = plan._read_tagged(buf, pos, out)", "    else:", "        pos += 1"]
        for j, (name, _, default) in enumerate(plan.tagged.values()):
            env[f"TD{j}"] = default
            rd.append(f"        out[{name!r}] = " + (f"TD{j}" if isinstance(default, _IMMUTABLE) else f"fresh(TD{j})"))
        if plan.tagged_out:
            tests = []
            for j, (_, name, _, default) in enumerate(plan.tagged_out):
                env[f"TO{j}"] = default
                wr.append(f"    t{j} = get({name!r}, MISSING)")
                tests.append(f"(t{j} is MISSING or t{j} == TO{j})")
            wr += [f"    if {' and '.join(tests)}:", "        out.append(b'\\x00')", "    else:",
                   "        plan._write_tagged(out, message)"]
        else:
            wr.append("    out.append(b'\\x00')")
    for j, (name, default) in enumerate(plan.absent):
        env[f"A{j}"] = default
        rd.append(f"    out[{name!r}] = " + (f"A{j}" if isinstance(default, _IMMUTABLE) else f"fresh(A{j})"))
    rd.append("    return out, pos")
    exec("\n".join(rd) + "\n\n" + "\n".join(wr), env)  # noqa: S102 - source built above from the schema
    return env["read"], env["write"]


class _DefaultStruct:
    """Default of a struct-typed field: a fresh dict of its fields' defaults each time."""

    __slots__ = ("plan",)

    def __init__(self, plan: _StructPlan) -> None:
        self.plan = plan

    def make(self) -> Message:
        message: Message = {}
        for name, _, _, default, _ in self.plan.fields:
            message[name] = _fresh(default)
        for _, name, _, default in self.plan.tagged_out:
            message[name] = _fresh(default)
        for name, default in self.plan.absent:
            message[name] = _fresh(default)
        return message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict) and other == self.make()

    __hash__ = None  # type: ignore[assignment]


class _EmptyList:
    """Default of an array field; a marker so every decode gets its own list."""

    def __eq__(self, other: object) -> bool:
        return other == []

    __hash__ = None  # type: ignore[assignment]


_EMPTY_LIST: Final = _EmptyList()


def _fresh(default: Any) -> Any:
    if default is _EMPTY_LIST:
        return []
    if type(default) is _DefaultStruct:
        return default.make()
    return default


def _type_default(field: Field, version: int, flexible: bool) -> Any:
    if field.default is not MISSING:
        return field.default
    kind = field.type
    if kind.startswith("["):
        return _EMPTY_LIST
    if kind == "struct":
        return _DefaultStruct(_compile_struct(field.fields, version, flexible))
    if kind == "bool":
        return False
    if kind == "float64":
        return 0.0
    if kind in _INT_TYPES:
        return 0
    if kind == "string":
        return ""
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    if kind == "uuid":
        return _ZERO_UUID
    raise ValueError(f"unknown field type {kind}")


def _codec_for(kind: str, field: Field, version: int, flexible: bool) -> tuple[_Reader, _Writer]:
    nullable = _in(field.nullable, version)
    if kind in _INT_TYPES:
        st = _INT_TYPES[kind]
        return _fixed_reader(st), _fixed_writer(st)
    if kind == "bool":
        return _read_bool, _write_bool
    if kind == "uuid":
        return _read_uuid, _write_uuid
    if kind in ("string", "bytes", "records"):
        return (
            _blob_reader(kind, flexible, nullable),
            _blob_writer(kind, flexible, nullable, field.name),
        )
    if kind == "struct":
        plan = _compile_struct(field.fields, version, flexible)
        if nullable:
            return _nullable_struct(plan.read, plan.write, field.name)
        return plan.read, plan.write
    if kind.startswith("[]"):
        if kind == "[]":
            plan = _compile_struct(field.fields, version, flexible)
            item_read, item_write = plan.read, plan.write
        else:
            item_read, item_write = _codec_for(kind[2:], Field(field.name, kind[2:], field.versions), version, flexible)
        return (
            _array_reader(item_read, flexible, nullable),
            _array_writer(item_write, flexible, nullable, field.name),
        )
    raise ValueError(f"unknown field type {kind}")


def _nullable_struct(read: _Reader, write: _Writer, name: str) -> tuple[_Reader, _Writer]:
    """A nullable struct (KIP-848's assignment): an int8 marker, -1 for null, 1 before the struct."""

    def read_nullable(buf: memoryview, pos: int) -> tuple[Any, int]:
        marker = _INT_TYPES["int8"].unpack_from(buf, pos)[0]
        if marker < 0:
            return None, pos + 1
        return read(buf, pos + 1)

    def write_nullable(out: list, value: Any) -> None:
        if value is None:
            out.append(b"\xff")
        else:
            out.append(b"\x01")
            write(out, value)

    return read_nullable, write_nullable


def _compile_struct(fields: tuple[Field, ...], version: int, flexible: bool) -> _StructPlan:
    regular = []
    tagged: dict[int, tuple[str, _Reader, Any]] = {}
    tagged_out = []
    absent = []
    for field in fields:
        default = _type_default(field, version, flexible)
        present = _in(field.versions, version)
        if present and field.tag is not None and not flexible:
            present = False  # tagged fields exist only in flexible versions
        if not present:
            absent.append((field.name, default))
            continue
        read, write = _codec_for(field.type, field, version, flexible)
        if field.tag is None:
            regular.append((field.name, read, write, default, _INT_TYPES.get(field.type)))
        else:
            tagged[field.tag] = (field.name, read, default)
            tagged_out.append((field.tag, field.name, write, default))
    tagged_out.sort(key=lambda entry: entry[0])
    return _StructPlan(tuple(regular), tagged, tuple(tagged_out), tuple(absent), flexible)


@cache
def _plan(api_key: int, api_version: int, response: bool) -> _StructPlan:
    api = _api(api_key, api_version)
    return _compile_struct(api.response if response else api.request, api_version, _is_flexible(api, api_version))


# --- public entry points ---------------------------------------------------------------------


def compile_all() -> None:
    """Compile every served request and response version now (0.2-0.5 s here, once per
    process), so that no client's first request of a kind waits for it on the event loop (a
    Fetch v12's plans take ~6 ms)."""
    for api_key, (low, high) in supported_versions().items():
        for version in range(low, high + 1):
            _plan(api_key, version, False)
            _plan(api_key, version, True)


def _decode(plan: _StructPlan, buf: Buffer) -> Message:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        message, _ = plan.read(view, 0)
    except DecodeError:
        raise
    except (struct.error, IndexError, ValueError) as exc:  # truncation, bad UTF-8
        raise DecodeError(str(exc)) from None
    return message


def _coalesce(parts: list) -> list[Buffer]:
    """Join runs of small parts; pass large ones (record blobs) through untouched."""
    out: list[Buffer] = []
    run: list = []
    for part in parts:
        if len(part) >= PASS_THROUGH:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(part)
        else:
            run.append(part)
    if run:
        out.append(b"".join(run))
    return out


def decode_request(api_key: int, api_version: int, body: Buffer) -> Message:
    """Decode a request body (the bytes after the request header); DecodeError too when
    it holds more than MAX_REQUEST_ITEMS array items and tagged fields in all."""
    plan = _plan(api_key, api_version, False)
    _BUDGET.left = MAX_REQUEST_ITEMS
    return _decode(plan, body)


def decode_response(api_key: int, api_version: int, body: Buffer) -> Message:
    """Decode a response body (the bytes after the response header)."""
    _BUDGET.left = -1
    return _decode(_plan(api_key, api_version, True), body)


def encode_request(api_key: int, api_version: int, message: Message) -> list[Buffer]:
    """Encode a request body; missing fields take their defaults."""
    parts: list = []
    _plan(api_key, api_version, False).write(parts, message)
    return _coalesce(parts)


def encode_response(api_key: int, api_version: int, message: Message) -> list[Buffer]:
    """Encode a response body; missing fields take their defaults."""
    parts: list = []
    _plan(api_key, api_version, True).write(parts, message)
    return _coalesce(parts)


@cache
def item_encoder(api_key: int, api_version: int, field: str) -> Callable[[Message], Encoded]:
    """Encodes one item of the response's top-level array ``field`` on its own, for the
    array's writer to take as it is."""
    api = _api(api_key, api_version)
    spec = next(f for f in api.response if f.name == field and f.type == "[]")
    write = _compile_struct(spec.fields, api_version, _is_flexible(api, api_version)).write

    def encode(item: Message) -> Encoded:
        parts: list = []
        write(parts, item)
        return Encoded(b"".join(parts))

    return encode


# --- headers ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Parse the header at the start of a request frame; returns it and the body position.

    Raises :class:`DecodeError` for a header that does not parse. The header version
    follows the API's flexible versions even beyond the served range (ApiVersions rule).
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(view) < _HEADER_FIXED.size:
        raise DecodeError(f"request header needs 8 bytes, frame holds {len(view)}")
    _BUDGET.left = MAX_REQUEST_ITEMS  # its tagged fields
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(view, 0)
    pos = _HEADER_FIXED.size
    try:
        client_id, pos = _CLIENT_ID(view, pos)
        if request_header_version(api_key, api_version) >= 2:
            pos = _SKIP_TAGS.read(view, pos)[1]
    except DecodeError:
        raise
    except (struct.error, IndexError, ValueError) as exc:
        raise DecodeError(f"bad request header: {exc}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    parts: list = [_HEADER_FIXED.pack(api_key, api_version, correlation_id)]
    _CLIENT_ID_WRITE(parts, client_id)
    if request_header_version(api_key, api_version) >= 2:
        parts.append(b"\x00")
    return b"".join(parts)


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    header = _I32.pack(correlation_id)
    return header + b"\x00" if response_header_version(api_key, api_version) >= 1 else header


def decode_response_header(api_key: int, api_version: int, frame: Buffer) -> tuple[int, int]:
    """(correlation id, body position) of a response frame."""
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    _BUDGET.left = -1
    try:
        (correlation_id,) = _I32.unpack_from(view, 0)
        pos = 4
        if response_header_version(api_key, api_version) >= 1:
            pos = _SKIP_TAGS.read(view, pos)[1]
    except (struct.error, IndexError) as exc:
        raise DecodeError(f"bad response header: {exc}") from None
    return correlation_id, pos


# The client id is a nullable int16-length string even in header v2 (never compact).
_CLIENT_ID: Final = _blob_reader("string", False, True)
_CLIENT_ID_WRITE: Final = _blob_writer("string", False, True, "client_id")
_SKIP_TAGS: Final = _StructPlan((), {}, (), (), True)  # a tagged section with no known tags
