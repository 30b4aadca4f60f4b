"""JSON bodies of remoting requests and responses, as typed dataclasses.

Like headers, every body is declared once as a dataclass; one engine (`decode_body`,
`encode_body`) walks the declaration: nested dataclasses, lists, string- or int-keyed
maps, and RocketMQ enums. Decoding is tolerant of how clients differ: fastjson's
unquoted keys (`{0:"addr"}`), enums as names (ali-ons, Java) or ordinals (C++), numbers as
strings; unknown keys are ignored. Encoding emits standard JSON, which every client
accepts. This module must never do I/O or implement broker behaviour.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from types import NoneType, UnionType
from typing import Any, TypeVar

import orjson

from .lenient_json import LenientJSONError, loads_lenient

T = TypeVar("T")


class BodyError(ValueError):
    """A body that is not JSON or does not have the shape its type declares."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"body {path or '<root>'} {reason}")
        self.path = path
        self.reason = reason


def key(name: str, **kwargs: Any) -> Any:
    """Declare a body field whose JSON key is not the camelCase of its name."""
    return field(metadata={"json": name}, **kwargs)


# --- RocketMQ enums: value = name; decoders also accept the Java ordinal ------------------


class ConsumeType(str, Enum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull consumer
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push consumer


class MessageModel(str, Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(str, Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# Names some clients use instead of the enum constant (ConsumeType's Java labels).
_ENUM_ALIASES: dict[type[Enum], dict[str, str]] = {
    ConsumeType: {"PULL": "CONSUME_ACTIVELY", "PUSH": "CONSUME_PASSIVELY"},
}


# --- the engine --------------------------------------------------------------------------

_Convert = Callable[[object, str], object]
_CONVERTERS: dict[object, _Convert] = {}
_FIELDS: dict[type, tuple[tuple[str, str, _Convert, bool], ...]] = {}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _json_key(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("json") or _camel(f.name)


def _to_str(value: object, path: str) -> str:
    if type(value) is str:
        return value
    if type(value) is int or type(value) is float:
        return str(value)
    raise BodyError(path, f"is not a string: {value!r}")


def _to_int(value: object, path: str) -> int:
    if type(value) is int:
        return value
    if type(value) is str:
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BodyError(path, f"is not an integer: {value!r}")


def _to_bool(value: object, path: str) -> bool:
    if type(value) is bool:
        return value
    if type(value) is str and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise BodyError(path, f"is not a boolean: {value!r}")


def _enum_converter(enum: type[Enum]) -> _Convert:
    members = list(enum)
    by_name = {m.name: m for m in members}
    by_name.update({alias: enum[name] for alias, name in _ENUM_ALIASES.get(enum, {}).items()})

    def convert(value: object, path: str) -> Enum:
        if type(value) is str and value.upper() in by_name:
            return by_name[value.upper()]
        if type(value) is int and 0 <= value < len(members):
            return members[value]
        raise BodyError(path, f"is not a {enum.__name__}: {value!r}")

    return convert


def _converter(tp: object) -> _Convert:
    convert = _CONVERTERS.get(tp)
    if convert is None:
        convert = _CONVERTERS[tp] = _build_converter(tp)
    return convert


def _build_converter(tp: object) -> _Convert:
    if tp is str:
        return _to_str
    if tp is int:
        return _to_int
    if tp is bool:
        return _to_bool
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum_converter(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda value, path: _decode_object(tp, value, path)
    if isinstance(tp, UnionType):  # `X | None`: null was handled by the caller
        return _converter(next(arg for arg in typing.get_args(tp) if arg is not NoneType))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        item = _converter(args[0])

        def convert_list(value: object, path: str) -> list[object]:
            if type(value) is not list:
                raise BodyError(path, "is not a list")
            return [item(v, f"{path}[{i}]") for i, v in enumerate(value)]

        return convert_list
    if origin is dict:
        map_key, map_value = _converter(args[0]), _converter(args[1])

        def convert_dict(value: object, path: str) -> dict[object, object]:
            if type(value) is not dict:
                raise BodyError(path, "is not an object")
            return {map_key(k, path): map_value(v, f"{path}.{k}") for k, v in value.items()}

        return convert_dict
    raise TypeError(f"bodies cannot declare fields of type {tp!r}")


def _fields(cls: type) -> tuple[tuple[str, str, _Convert, bool], ...]:
    spec = _FIELDS.get(cls)
    if spec is None:
        hints = typing.get_type_hints(cls)
        spec = _FIELDS[cls] = tuple(
            (
                f.name,
                _json_key(f),
                _converter(hints[f.name]),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
    return spec


def _decode_object(cls: type[T], value: object, path: str) -> T:
    if type(value) is not dict:
        raise BodyError(path, f"is not an object for {cls.__name__}")
    kwargs: dict[str, object] = {}
    for name, json_key, convert, required in _fields(cls):
        raw = value.get(json_key)
        sub_path = f"{path}.{json_key}" if path else json_key
        if raw is None:
            if required:
                raise BodyError(sub_path, "is missing")
            continue
        kwargs[name] = convert(raw, sub_path)
    return cls(**kwargs)


def decode_body(cls: type[T], data: bytes | bytearray | memoryview | str) -> T:
    """Parse a JSON body (bare keys allowed) into dataclass `cls`; raises BodyError, also
    when a request body holds more than MAX_REQUEST_ENTRIES entries."""
    try:
        obj = loads_lenient(data)
    except LenientJSONError as exc:
        raise BodyError("", str(exc)) from None
    if cls in REQUEST_BODIES and _holds_more_than(obj, MAX_REQUEST_ENTRIES):
        raise BodyError("", f"holds more than {MAX_REQUEST_ENTRIES} list items and object members")
    return _decode_object(cls, obj, "")


def _holds_more_than(obj: object, limit: int) -> bool:
    """Whether the lists and objects in `obj` hold more than `limit` items and members in
    all; looks at no more than `limit` of them."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if type(value) is list:
            entries: Any = value
        elif type(value) is dict:
            entries = value.values()
        else:
            continue
        limit -= len(value)
        if limit < 0:
            return True
        stack.extend(v for v in entries if type(v) is list or type(v) is dict)
    return False


def body_to_json_obj(value: object) -> object:
    """The JSON-ready form of a body: dicts with camelCase keys, enums as names."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, object] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is not None:
                out[_json_key(f)] = body_to_json_obj(item)
        return out
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, (list, tuple, set, frozenset)):
        return [body_to_json_obj(v) for v in value]
    if isinstance(value, dict):
        return {str(k): body_to_json_obj(v) for k, v in value.items()}
    return value


def encode_body(value: object) -> bytes:
    """Standard JSON for a body dataclass (map keys quoted, None fields omitted)."""
    return orjson.dumps(body_to_json_obj(value))


# --- client heartbeat and consumer groups -----------------------------------------------------


@dataclass(slots=True, frozen=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = "*"
    class_filter_mode: bool = False
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)  # C++ sends [0,0]: filter by tag string
    sub_version: int = 0
    expression_type: str = "TAG"
    filter_class_source: str | None = None


@dataclass(slots=True)
class ProducerData:
    group_name: str


@dataclass(slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@dataclass(slots=True)
class HeartbeatData:
    client_id: str = key("clientID")
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[str] = field(default_factory=list)


@dataclass(slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) carry the same body."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)


@dataclass(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: list[MessageQueue] = key("lockOKMQSet", default_factory=list)


# --- routes and cluster --------------------------------------------------------------------------


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6  # PermName: 4 read | 2 write
    topic_sys_flag: int = 0


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)  # brokerId (0 = master) -> addr


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None


@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None


# --- broker registration -------------------------------------------------------------------------


@dataclass(slots=True)
class DataVersion:
    timestamp: int = 0
    counter: int = 0


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """GET_ALL_TOPIC_CONFIG's body, and the heart of REGISTER_BROKER's."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(slots=True)
class RegisterBrokerBody:
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)


@dataclass(slots=True)
class KVTable:
    """REGISTER_BROKER's response body (name-server KV config for the broker)."""

    table: dict[str, str] = field(default_factory=dict)


# List items and object members a request body may hold in all (responses, which our own
# tools decode, have no limit). Bytes alone do not bound the work: a 14 MB heartbeat of
# 200,000 consumer entries (a million members) held the event loop 4 s. Decoding costs
# ~1 us an entry; a heavy real heartbeat (200 groups of 50 subscriptions) holds 120,000,
# a lock request of 20,000 queues 80,000, a registration of 20,000 topics 160,000.
MAX_REQUEST_ENTRIES = 500_000
REQUEST_BODIES = frozenset({HeartbeatData, LockBatchRequestBody, RegisterBrokerBody})
