"""The messages, results and verdicts a client user handles.

`Message` is what a producer sends; `MessageExt` is what a consumer receives (built from
a pull body's record, properties decoded only when read). The enums mirror RocketMQ's
names so that code ported from the Java client reads the same. This module only builds
and reads records: it must never do I/O.
"""

from __future__ import annotations

import datetime
import enum
import zlib
from dataclasses import dataclass, field

from rocketport.common.message import (
    COMPRESSED_FLAG,
    KEY_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    decode_properties,
)
from rocketport.protocols.remoting.bodies import MessageQueue
from rocketport.protocols.remoting.messages import RawMessageExt

__all__ = ["ConsumeResult", "LocalTransactionState", "Message", "MessageExt", "MessageQueue",
           "SendResult", "SendStatus"]


@dataclass(slots=True)
class Message:
    """A message to send. `keys` index it for lookup; `delay_level` (1..18) and
    `deliver_at` (epoch seconds or an aware datetime) make it scheduled."""

    topic: str
    body: bytes
    tags: str | None = field(default=None, kw_only=True)
    keys: str | list[str] | None = field(default=None, kw_only=True)
    properties: dict[str, str] | None = field(default=None, kw_only=True)
    delay_level: int | None = field(default=None, kw_only=True)
    deliver_at: float | datetime.datetime | None = field(default=None, kw_only=True)

    def wire_properties(self) -> dict[str, str]:
        """The properties as they travel: user properties plus TAGS, KEYS, DELAY, timer."""
        props = dict(self.properties) if self.properties else {}
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = (self.keys if isinstance(self.keys, str)
                                    else KEY_SEPARATOR.join(self.keys))
        if self.delay_level:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        if self.deliver_at is not None:
            at = self.deliver_at
            seconds = at.timestamp() if isinstance(at, datetime.datetime) else float(at)
            props[PROPERTY_TIMER_DELIVER_MS] = str(int(seconds * 1000))
        return props


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """`msg_id` is the client's unique id (comma-joined for a batch), `offset_msg_id` the
    broker's (store host + commit-log offset), which finds the message by offset."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None

    @property
    def queue_id(self) -> int:
        return self.queue.queue_id


class ConsumeResult(enum.Enum):
    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class LocalTransactionState(enum.Enum):
    COMMIT = "COMMIT_MESSAGE"
    ROLLBACK = "ROLLBACK_MESSAGE"
    UNKNOWN = "UNKNOW"


class MessageExt:
    """A received message. Retry deliveries show their original topic (as RocketMQ's
    clients reset it), with `reconsume_times` counting earlier deliveries."""

    __slots__ = ("topic", "body", "_raw_properties", "_properties", "queue_id", "queue_offset",
                 "commit_log_offset", "sys_flag", "born_timestamp", "store_timestamp",
                 "store_host", "reconsume_times", "broker_name")

    def __init__(self, raw: RawMessageExt, broker_name: str) -> None:
        (self.queue_id, _flag, self.queue_offset, self.commit_log_offset, self.sys_flag,
         self.born_timestamp, self.store_timestamp, self.store_host, self.reconsume_times,
         body, self.topic, self._raw_properties) = raw
        self.body = zlib.decompress(body) if self.sys_flag & COMPRESSED_FLAG else body
        self._properties: dict[str, str] | None = None
        self.broker_name = broker_name

    @property
    def properties(self) -> dict[str, str]:
        props = self._properties
        if props is None:
            props = self._properties = decode_properties(self._raw_properties)
        return props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @property
    def offset_msg_id(self) -> str:
        return (self.store_host + self.commit_log_offset.to_bytes(8, "big")).hex().upper()

    @property
    def msg_id(self) -> str:
        """The producer's unique id when it set one, else the offset message id."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def reset_retry_topic(self) -> None:
        """A message pulled from %RETRY%group shows the topic it was first sent to."""
        real = self.properties.get(PROPERTY_RETRY_TOPIC)
        if real:
            self.topic = real

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, tags={self.tags!r}, body={self.body[:32]!r})")

