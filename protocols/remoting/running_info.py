"""The bodies a consumer answers when an admin reaches it through a broker.

GET_CONSUMER_RUNNING_INFO (307) is answered with RocketMQ's ConsumerRunningInfo (the
consumer's settings as properties, its subscriptions, a ProcessQueueInfo per held queue,
consume statistics per topic, optionally a stack dump) and CONSUME_MESSAGE_DIRECTLY (309)
with ConsumeMessageDirectlyResult. Both are read by Java's mqadmin, so they are written as
the Java client writes them: Java's field names (`droped` included) and the MessageQueue
objects themselves as `mqTable` keys (mq_tables). Pure encoding and decoding; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from .bodies import BodyError, SubscriptionData, body_to_json_obj, decode_body, encode_body, key
from .lenient_json import LenientJSONError
from .mq_tables import MessageQueueKey, encode_body as encode_mq_body, loads as loads_mq_body

# ConsumerRunningInfo's property names, as Java's constants spell them
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


@dataclass(slots=True)
class ProcessQueueInfo:
    """One held queue as the consumer sees it; timestamps are epoch milliseconds."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = key("cachedMsgSizeInMiB", default=0)
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = key("droped", default=False)  # RocketMQ's spelling on the wire
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


STATUS_FIELDS = ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS",
                 "consumeFailedMsgs")  # ConsumeStatus, per subscribed topic


@dataclass(slots=True)
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueueKey, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, dict[str, float]] = field(default_factory=dict)
    jstack: str | None = None


def encode_running_info(info: ConsumerRunningInfo) -> bytes:
    fields: dict[str, Any] = {
        "properties": info.properties,
        "subscriptionSet": [body_to_json_obj(s) for s in info.subscription_set],
        "statusTable": info.status_table}
    if info.jstack is not None:
        fields["jstack"] = info.jstack
    table = {k: body_to_json_obj(v) for k, v in sorted(info.mq_table.items())}
    return encode_mq_body(fields, {"mqTable": table})


def decode_running_info(body: bytes | bytearray | memoryview) -> ConsumerRunningInfo:
    """Raises BodyError for a body that is not a ConsumerRunningInfo."""
    try:
        obj = loads_mq_body(body)
    except LenientJSONError as exc:
        raise BodyError("", str(exc)) from None
    if type(obj) is not dict:
        raise BodyError("", "is not an object")
    try:
        return ConsumerRunningInfo(
            {str(k): _text(v) for k, v in (obj.get("properties") or {}).items()},
            [decode_body(SubscriptionData, orjson.dumps(s)) for s in obj.get("subscriptionSet") or []],
            {_queue(k): decode_body(ProcessQueueInfo, orjson.dumps(v))
             for k, v in (obj.get("mqTable") or {}).items()},
            {str(t): dict(s) for t, s in (obj.get("statusTable") or {}).items()},
            obj.get("jstack"))
    except BodyError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise BodyError("", str(exc)) from None


def _queue(k: object) -> MessageQueueKey:
    if not isinstance(k, MessageQueueKey):
        raise BodyError("mqTable", f"key {k!r} is not a MessageQueue")
    return k


def _text(value: object) -> str:
    """A Properties value as Java prints it (fastjson may write an enum or number)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class CMResult(str, Enum):
    """What a directly consumed message's listener returned."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(slots=True)
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: CMResult | None = None
    remark: str | None = None
    spent_time_mills: int = 0  # RocketMQ's spelling


def encode_direct_result(result: ConsumeMessageDirectlyResult) -> bytes:
    return encode_body(result)


def decode_direct_result(body: bytes | bytearray | memoryview) -> ConsumeMessageDirectlyResult:
    """Raises BodyError for a body that is not a ConsumeMessageDirectlyResult."""
    return decode_body(ConsumeMessageDirectlyResult, body)
