"""Typed request and response headers carried in a command's extFields.

Each header is a dataclass whose fields are declared once; `decode_header` and
`encode_header` read that declaration (Python type + extFields key, camelCase of the field
name unless overridden with `ext()`) and do all coercion in one place. Decoding is
tolerant as clients differ: values may be strings, numbers or booleans; integers may be
decimal strings; booleans "true"/"false"/"1"/"0". A missing or unparsable required field
raises `HeaderError` naming the extFields key. This module must never do I/O or know
broker semantics.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, TypeVar

from .codes import RequestCode

T = TypeVar("T")

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class HeaderError(ValueError):
    """An extFields entry that a header needs is missing or malformed."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"header field {field!r} {reason}")
        self.field = field
        self.reason = reason


def ext(key: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a header field whose extFields key is not the camelCase of its name."""
    return dataclasses.field(default=default, metadata={"ext": key})


def i32(default: Any = dataclasses.MISSING) -> Any:
    """Declare an int field Java declares as Integer: refused outside the int32 range, so
    a value that cannot go into a record is named at decoding, not where it is packed."""
    return dataclasses.field(default=default, metadata={"i32": True})


# --- the engine --------------------------------------------------------------------------

_Missing = object()


def _to_str(value: object) -> object:
    if type(value) is str:
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int or type(value) is float:
        return str(value)
    raise ValueError("is not a string")


def _to_int(value: object) -> object:
    if type(value) is str:
        text = value.strip()
        if not text:
            return _Missing
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"is not an integer: {value!r}") from None
    elif type(value) is int:
        number = value
    else:
        raise ValueError(f"is not an integer: {value!r}")
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise ValueError(f"is out of range: {value!r}")
    return number


def _to_int32(value: object) -> object:
    number = _to_int(value)
    if number is not _Missing and not _INT32_MIN <= number <= _INT32_MAX:  # type: ignore[operator]
        raise ValueError(f"is out of the int32 range: {value!r}")
    return number


_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


def _to_bool(value: object) -> object:
    if value is True or value is False:
        return value
    if type(value) is str:
        text = value.strip().lower()
        if not text:
            return _Missing
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    elif type(value) is int and value in (0, 1):
        return bool(value)
    raise ValueError(f"is not a boolean: {value!r}")


_COERCERS: dict[type, Callable[[object], object]] = {str: _to_str, int: _to_int, bool: _to_bool}


@dataclass(slots=True, frozen=True)
class _FieldSpec:
    name: str  # attribute name
    key: str  # extFields key
    coerce: Callable[[object], object]
    required: bool


_SPECS: dict[type, tuple[_FieldSpec, ...]] = {}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _field_specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        built = []
        for f in dataclasses.fields(cls):
            kind = hints[f.name]
            if isinstance(kind, UnionType):  # `X | None`
                kind = next(arg for arg in typing.get_args(kind) if arg is not NoneType)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            coerce = _to_int32 if f.metadata.get("i32") else _COERCERS[kind]
            built.append(_FieldSpec(f.name, f.metadata.get("ext", _camel(f.name)), coerce, required))
        specs = _SPECS[cls] = tuple(built)
    return specs


def decode_header(cls: type[T], ext_fields: Mapping[str, object]) -> T:
    """Build header `cls` from extFields; unknown keys are ignored (clients add ACL keys)."""
    kwargs: dict[str, object] = {}
    for spec in _field_specs(cls):
        raw = ext_fields.get(spec.key)
        value = _Missing if raw is None else _coerce(spec, raw)
        if value is _Missing:
            if spec.required:
                raise HeaderError(spec.key, "is missing")
            continue
        kwargs[spec.name] = value
    return cls(**kwargs)


def _coerce(spec: _FieldSpec, raw: object) -> object:
    try:
        return spec.coerce(raw)
    except ValueError as exc:
        raise HeaderError(spec.key, str(exc)) from None


def encode_header(header: object) -> dict[str, str]:
    """extFields for `header`: every non-None field as a string, booleans as true/false."""
    out: dict[str, str] = {}
    for spec in _field_specs(type(header)):
        value = getattr(header, spec.name)
        if value is None:
            continue
        if value is True or value is False:
            out[spec.key] = "true" if value else "false"
        else:
            out[spec.key] = str(value)
    return out


# --- send ----------------------------------------------------------------------------------


@dataclass(slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE (10), SEND_BATCH_MESSAGE (320) and, via short keys, SEND_MESSAGE_V2."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int = i32()
    queue_id: int = i32()
    sys_flag: int = i32()
    born_timestamp: int
    flag: int = i32()
    properties: str | None = None
    reconsume_times: int = i32(0)
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = i32(None)
    broker_name: str | None = None


# SEND_MESSAGE_V2 / SEND_REPLY_MESSAGE_V2 shorten every key to one letter to save bytes.
SEND_MESSAGE_V2_KEYS: dict[str, str] = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
_SEND_MESSAGE_V1_KEYS = {long: short for short, long in SEND_MESSAGE_V2_KEYS.items()}
_V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_REPLY_MESSAGE_V2})


def _flag(value: object) -> bool:
    if value is None:
        return False
    text = value.strip().lower()  # type: ignore[union-attr]
    if text in _TRUE:
        return True
    if text in _FALSE or not text:
        return False
    raise ValueError(text)


def _decode_send_v2_fast(ext: Mapping[str, object]) -> SendMessageRequestHeader | None:
    """The hot path of every send: well-formed V2 string fields, no generic engine.

    Returns None for anything unusual (missing keys, non-strings, odd values, out of
    range) so that the generic decoder handles it and names the offending key.
    """
    try:
        group, topic, default_topic = ext["a"], ext["b"], ext["c"]
        queue_nums, queue_id, sys_flag = int(ext["d"]), int(ext["e"]), int(ext["f"])  # type: ignore[arg-type]
        born, flag = int(ext["g"]), int(ext["h"])  # type: ignore[arg-type]
        get = ext.get
        reconsume = get("j")
        reconsume_times = int(reconsume) if reconsume else 0  # type: ignore[arg-type]
        max_reconsume = get("l")
        max_reconsume_times = int(max_reconsume) if max_reconsume else None  # type: ignore[arg-type]
        unit_mode = get("k")  # "false" or absent in nearly every send: spare the call
        unit_mode = False if unit_mode is None or unit_mode == "false" else _flag(unit_mode)
        batch = get("m")
        batch = False if batch is None or batch == "false" else _flag(batch)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    if type(group) is not str or type(topic) is not str or type(default_topic) is not str:
        return None
    if not (_INT32_MIN <= queue_nums <= _INT32_MAX and _INT32_MIN <= queue_id <= _INT32_MAX
            and _INT32_MIN <= sys_flag <= _INT32_MAX and _INT64_MIN <= born <= _INT64_MAX
            and _INT32_MIN <= flag <= _INT32_MAX and _INT32_MIN <= reconsume_times <= _INT32_MAX
            and (max_reconsume_times is None or _INT32_MIN <= max_reconsume_times <= _INT32_MAX)):
        return None
    return SendMessageRequestHeader(group, topic, default_topic, queue_nums, queue_id, sys_flag,
                                    born, flag, get("i"), reconsume_times,  # type: ignore[arg-type]
                                    unit_mode, batch, max_reconsume_times, get("n"))  # type: ignore[arg-type]


def decode_send_message_header(code: int, ext_fields: Mapping[str, object]) -> SendMessageRequestHeader:
    """Decode either send header form into one dataclass, choosing the form by `code`."""
    # Java clients send SEND_BATCH_MESSAGE with the V2 short keys; C++ with long ones.
    if code in _V2_CODES or (code == RequestCode.SEND_BATCH_MESSAGE and "b" in ext_fields
                             and "topic" not in ext_fields):
        fast = _decode_send_v2_fast(ext_fields)
        if fast is not None:
            return fast
        long_keys = SEND_MESSAGE_V2_KEYS
        ext_fields = {long_keys[k]: v for k, v in ext_fields.items() if k in long_keys}
        try:
            return decode_header(SendMessageRequestHeader, ext_fields)
        except HeaderError as exc:  # name the key the client actually sent
            raise HeaderError(_SEND_MESSAGE_V1_KEYS[exc.field], exc.reason) from None
    return decode_header(SendMessageRequestHeader, ext_fields)


def encode_send_message_header_v2(header: SendMessageRequestHeader) -> dict[str, str]:
    """extFields of a SEND_MESSAGE_V2 request, as a client sends them."""
    short = _SEND_MESSAGE_V1_KEYS
    return {short[k]: v for k, v in encode_header(header).items()}


@dataclass(slots=True)
class SendMessageResponseHeader:
    msg_id: str  # offset message id(s), comma-joined for a batch
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = ext("MSG_REGION", None)
    trace_on: str | None = ext("TRACE_ON", None)


# --- pull and offsets ----------------------------------------------------------------------


@dataclass(slots=True)
class PullMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int  # 1 commit offset, 2 suspend (long poll), 4 subscription, 8 class filter
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None = None
    sub_version: int = 0
    expression_type: str | None = None  # TAG (default) or SQL92


def decode_pull_message_header(ext_fields: Mapping[str, object]) -> PullMessageRequestHeader:
    """`decode_header` for the hot PULL_MESSAGE: well-formed string fields skip the generic
    engine, anything unusual goes through it (which names the offending key)."""
    ext = ext_fields
    try:
        group, topic = ext["consumerGroup"], ext["topic"]
        queue_id, queue_offset = int(ext["queueId"]), int(ext["queueOffset"])  # type: ignore[arg-type]
        max_nums, sys_flag = int(ext["maxMsgNums"]), int(ext["sysFlag"])  # type: ignore[arg-type]
        commit, hold = int(ext["commitOffset"]), int(ext["suspendTimeoutMillis"])  # type: ignore[arg-type]
        get = ext.get
        sub_version = get("subVersion")
        sub_version = int(sub_version) if sub_version else 0  # type: ignore[arg-type]
        subscription, expression_type = get("subscription"), get("expressionType")
    except (KeyError, ValueError, TypeError):
        return decode_header(PullMessageRequestHeader, ext_fields)
    if (type(group) is not str or type(topic) is not str
            or not (type(subscription) is str or subscription is None)
            or not (type(expression_type) is str or expression_type is None)
            or not (_INT64_MIN <= queue_id <= _INT64_MAX and _INT64_MIN <= queue_offset <= _INT64_MAX
                    and _INT64_MIN <= max_nums <= _INT64_MAX and _INT64_MIN <= sys_flag <= _INT64_MAX
                    and _INT64_MIN <= commit <= _INT64_MAX and _INT64_MIN <= hold <= _INT64_MAX
                    and _INT64_MIN <= sub_version <= _INT64_MAX)):
        return decode_header(PullMessageRequestHeader, ext_fields)
    return PullMessageRequestHeader(group, topic, queue_id, queue_offset, max_nums, sys_flag,
                                    commit, hold, subscription, sub_version, expression_type)


@dataclass(slots=True)
class PullMessageResponseHeader:
    """Every pull response carries all four, NOT_FOUND included (ali-ons reads them)."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int


@dataclass(slots=True)
class QueryConsumerOffsetResponseHeader:
    offset: int


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(slots=True)
class SearchOffsetRequestHeader:
    topic: str
    queue_id: int
    timestamp: int


@dataclass(slots=True)
class SearchOffsetResponseHeader:
    offset: int


@dataclass(slots=True)
class GetMaxOffsetRequestHeader:
    topic: str
    queue_id: int


@dataclass(slots=True)
class GetMaxOffsetResponseHeader:
    offset: int


@dataclass(slots=True)
class GetMinOffsetRequestHeader:
    topic: str
    queue_id: int


@dataclass(slots=True)
class GetMinOffsetResponseHeader:
    offset: int


@dataclass(slots=True)
class GetEarliestMsgStoretimeRequestHeader:
    topic: str
    queue_id: int


@dataclass(slots=True)
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: int


# --- consumers, retry, transactions ----------------------------------------------------------


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader:
    offset: int  # commit-log offset of the message being returned
    group: str
    delay_level: int  # 0: the broker picks 3 + reconsumeTimes
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@dataclass(slots=True)
class EndTransactionRequestHeader:
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int  # 8 commit, 12 rollback, 0 unknown (MessageSysFlag values)
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader:
    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader:
    consumer_group: str


@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader:
    consumer_group: str


@dataclass(slots=True)
class UnregisterClientRequestHeader:
    client_id: str = ext("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None



# --- queries -------------------------------------------------------------------------------


@dataclass(slots=True)
class QueryMessageRequestHeader:
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(slots=True)
class QueryMessageResponseHeader:
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(slots=True)
class ViewMessageRequestHeader:
    offset: int  # commit-log offset decoded from an offset message id


# --- administration ------------------------------------------------------------------------


@dataclass(slots=True)
class CreateTopicRequestHeader:
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int | None = None
    order: bool = False


@dataclass(slots=True)
class DeleteTopicRequestHeader:
    topic: str


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader:
    group_name: str
    remove_offset: bool = False


@dataclass(slots=True)
class GetTopicStatsInfoRequestHeader:
    topic: str


@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader:
    consumer_group: str


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader:
    producer_group: str


@dataclass(slots=True)
class GetConsumeStatsRequestHeader:
    consumer_group: str
    topic: str | None = None


@dataclass(slots=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str
    group: str
    timestamp: int
    is_force: bool = ext("isForce", False)



@dataclass(slots=True)
class KVConfigRequestHeader:
    """PUT_KV_CONFIG (100; value set), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str
    value: str | None = None


@dataclass(slots=True)
class GetKVConfigResponseHeader:
    value: str | None = None


@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader:
    namespace: str


@dataclass(slots=True)
class WriteOfBrokerRequestHeader:
    """WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader:
    wipe_topic_count: int


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader:
    add_topic_count: int


@dataclass(slots=True)
class QueryTopicConsumeByWhoRequestHeader:
    topic: str


@dataclass(slots=True)
class CloneGroupOffsetRequestHeader:
    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO (307), admin to broker and broker to client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader:
    """CONSUME_MESSAGE_DIRECTLY (309): `msg_id` is the offset message id; the broker adds
    its `broker_name` before passing the request on to the client."""

    consumer_group: str
    client_id: str
    msg_id: str
    broker_name: str | None = None


# --- name server ---------------------------------------------------------------------------


@dataclass(slots=True)
class GetRouteInfoRequestHeader:
    topic: str
    accept_standard_json_only: bool = False


@dataclass(slots=True)
class RegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False


@dataclass(slots=True)
class RegisterBrokerResponseHeader:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class UnRegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int






@dataclass(slots=True)
class QueryDataVersionRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class QueryDataVersionResponseHeader:
    changed: bool
