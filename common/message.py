"""Protocol-neutral message model: property names, system flags, property encoding.

Names follow RocketMQ (MessageConst / MessageSysFlag) so that RocketMQ users recognise them
and remoting clients can be served without translation. This module must never import a
protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

# --- property names (RocketMQ MessageConst) ---------------------------------------------
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_BUYER_ID = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_INSTANCE_ID = "INSTANCE_ID"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
# Beyond RocketMQ 4's fixed levels: deliver at an absolute time (ms since epoch), as 5.x does.
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_DEDUP_KEY = "DEDUP_KEY"  # Rocketport's: a producer's repeat is dropped (core/dedup.py)
# Rocketport's: an AMQP header table holding more than strings, as published (base64 of its
# wire bytes), so an AMQP consumer gets its types back; every header is also a property of
# its own, as text, for every other reader (protocols/amqp/properties.py)
PROPERTY_AMQP_HEADERS = "AMQP_HEADERS"

KEY_SEPARATOR = " "

# --- system flags (RocketMQ MessageSysFlag) ---------------------------------------------
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
NEED_UNWRAP_FLAG = 0x1 << 6
INNER_BATCH_FLAG = 0x1 << 7


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


def reset_transaction_type(sys_flag: int, tx_type: int) -> int:
    return (sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | tx_type


# --- properties: name \x01 value \x02 ----------------------------------------------------
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def encode_properties(properties: dict[str, str] | None) -> bytes:
    """Encode as RocketMQ's messageProperties2String does (UTF-8, trailing \\x02)."""
    if not properties:
        return b""
    if len(properties) > 2:  # retry and schedule copies carry ten or so: join them in C
        try:
            text = "\x02".join(map("\x01".join, properties.items())) + "\x02"
            return text.encode("utf-8", "surrogateescape")
        except TypeError:  # a None value, skipped below
            pass
    text = ""
    for k, v in properties.items():  # a plain loop is the fastest form for one or two
        if v is not None:
            text += k + "\x01" + v + "\x02"
    return text.encode("utf-8", "surrogateescape")


def decode_properties(data: bytes | memoryview | str) -> dict[str, str]:
    """Decode name \x01 value \x02 pairs; tolerates a missing trailing separator.

    Split once on both separators and pair up: the fastest form measured here (the SQL92
    filter decodes the properties of every message it evaluates).
    """
    if not data:
        return {}
    text = data if isinstance(data, str) else str(data, "utf-8", "surrogateescape")
    parts = text.replace("\x02", "\x01").split("\x01")
    return dict(zip(parts[0:-1:2], parts[1::2]))


def property_needles(name: str) -> tuple[bytes, bytes]:
    """What `raw_property` looks for: ``\\x02name\\x01`` and, for the first property,
    ``name\\x01`` (precompute them once per name)."""
    head = name.encode("utf-8", "surrogateescape") + b"\x01"
    return b"\x02" + head, head


# The two properties read undecoded on hot paths (tags code and filters; send responses).
TAGS_NEEDLES = property_needles(PROPERTY_TAGS)
UNIQ_KEY_NEEDLES = property_needles(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


def property_bytes(raw: bytes, needles: tuple[bytes, bytes]) -> bytes | None:
    """One property of encoded properties, undecoded, found without decoding the others.

    Filters read one to three properties of every message they check and a send reads its
    tags and unique key; decoding all of them costs several times more. Answers as
    `decode_properties` does for well-formed data: the last occurrence of a name wins and
    a missing trailing separator is tolerated.
    """
    needle, head = needles
    _, found, rest = raw.rpartition(needle)
    if not found:
        before, found, rest = raw.partition(head)
        if not found or before:  # only the first property has no separator before it
            return None
    return rest.partition(b"\x02")[0]


def without_unique_key(raw: bytes) -> bytes:
    """Encoded properties without their (first) UNIQ_KEY pair: a front-end that never shows
    UNIQ_KEY keys what it renders from a message's properties by these octets, which one
    producer's messages share, rather than by the whole, unique to each message."""
    needle, head = UNIQ_KEY_NEEDLES
    at = raw.find(needle)
    if at >= 0:
        start = at + 1
    elif raw.startswith(head):
        start = 0
    else:
        return raw
    end = raw.find(b"\x02", start)
    return raw[:start] + raw[end + 1:] if end >= 0 else raw[:start]


def raw_property(raw: bytes, needles: tuple[bytes, bytes]) -> str | None:
    """`property_bytes`, decoded as `decode_properties` decodes values."""
    value = property_bytes(raw, needles)
    if value is None:
        return None
    try:
        return value.decode()  # the strict codec's fast path: half the cost
    except UnicodeDecodeError:
        return value.decode("utf-8", "surrogateescape")


class _PropertyViews:
    """Read-only views of well-known properties, shared by Message and MessageExt."""

    __slots__ = ()
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


@dataclass(slots=True)
class Message(_PropertyViews):
    """A message as a producer hands it to the broker (RocketMQ's MessageExtBrokerInner)."""

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    queue_id: int = -1  # -1: the broker picks a queue
    sys_flag: int = 0
    born_timestamp: int = 0  # ms; 0: the broker stamps it
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(slots=True)
class MessageExt(_PropertyViews):
    """A stored message as read back (RocketMQ's MessageExt)."""

    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    body_crc: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int


# The properties the broker reads or sets (RocketMQ's MessageConst names, and Rocketport's
# own): front-ends do not show them as a consumer's headers. DEDUP_KEY is the sender's own
# and comes back as one.
SYSTEM_PROPERTY_NAMES: Final = frozenset(
    value for name, value in list(globals().items()) if name.startswith("PROPERTY_") and isinstance(value, str)
) - {PROPERTY_DEDUP_KEY}
