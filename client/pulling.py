"""PULL_MESSAGE as both consumers send it, and what its answer means.

One precompiled frame template per (suspend, subscription) shape; the response becomes a
`PullResult`: its status, the next offset and the decoded messages (tags checked on the
client too, as RocketMQ's consumers do, since a broker may filter by tag hash only).
Nothing here keeps state between pulls.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass

from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import MessageQueue
from rocketport.protocols.remoting.frame import JsonFrameTemplate, json_text
from rocketport.protocols.remoting.messages import MessageFormatError, unpack_message_ext_records

from .errors import ClientError
from .message import MessageExt
from .transport import Connection, Sent

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
BROKER_SUSPEND_S = 15.0  # how long the broker may hold a pull (RocketMQ's default)
PULL_TIMEOUT_S = 30.0  # a held pull's answer may take that long, plus the network


class PullStatus(enum.Enum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


_STATUS = {ResponseCode.SUCCESS: PullStatus.FOUND,
           ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
           ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
           ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


@dataclass(slots=True)
class Subscription:
    """A topic's filter: a tag expression ("*", "A || B") or SQL92."""

    topic: str
    expression: str = "*"
    expression_type: str = "TAG"

    @property
    def tags(self) -> frozenset[str] | None:
        """The tags a TAG expression accepts; None when it accepts every message."""
        if self.expression_type != "TAG" or self.expression.strip() in ("", "*"):
            return None
        return frozenset(t.strip() for t in self.expression.split("||") if t.strip())


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]


class Puller:
    """Pulls for one consumer group, with its subscriptions sent along or not."""

    def __init__(self, group: str) -> None:
        self._group_name = group
        self._group = json_text(group.encode())
        self._templates = {send_sub: JsonFrameTemplate(RequestCode.PULL_MESSAGE, {
            "consumerGroup": bytes, "topic": bytes, "queueId": int, "queueOffset": int,
            "maxMsgNums": int, "sysFlag": int, "commitOffset": int,
            "suspendTimeoutMillis": int, "subVersion": "0",
            **({"subscription": bytes, "expressionType": bytes} if send_sub else {})}, flag=0)
            for send_sub in (False, True)}
        self._texts: dict[str, bytes] = {}

    def _text(self, value: str) -> bytes:
        text = self._texts.get(value)
        if text is None:
            text = self._texts[value] = json_text(value.encode())
        return text

    def send(self, conn: Connection, mq: MessageQueue, offset: int, max_nums: int,
             sub: Subscription, *, suspend: bool, send_subscription: bool,
             commit_offset: int = -1) -> Sent:
        """Put a pull on the wire; `conn.response` of what this returns is its answer."""
        flag = (FLAG_SUSPEND if suspend else 0) | (FLAG_SUBSCRIPTION if send_subscription else 0)
        if commit_offset >= 0:
            flag |= FLAG_COMMIT_OFFSET
        hold_ms = int(BROKER_SUSPEND_S * 1000) if suspend else 0
        if conn.credentials is not None:  # signed: a command with its final fields
            fields = {"consumerGroup": self._group_name, "topic": mq.topic,
                      "queueId": str(mq.queue_id), "queueOffset": str(offset),
                      "maxMsgNums": str(max_nums), "sysFlag": str(flag),
                      "commitOffset": str(max(commit_offset, 0)),
                      "suspendTimeoutMillis": str(hold_ms), "subVersion": "0"}
            if send_subscription:
                fields.update(subscription=sub.expression, expressionType=sub.expression_type)
            return conn.request(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=fields))
        values: tuple[bytes | int, ...] = (
            self._group, self._text(mq.topic), mq.queue_id, offset, max_nums, flag,
            max(commit_offset, 0), hold_ms)
        if send_subscription:
            values += (self._text(sub.expression), self._text(sub.expression_type))
        return conn.request_template(self._templates[send_subscription], values, b"")

    async def pull(self, conn: Connection, mq: MessageQueue, offset: int, max_nums: int,
                   sub: Subscription, *, suspend: bool, send_subscription: bool,
                   commit_offset: int = -1, timeout_s: float = PULL_TIMEOUT_S) -> PullResult:
        response = await conn.response(
            self.send(conn, mq, offset, max_nums, sub, suspend=suspend,
                      send_subscription=send_subscription, commit_offset=commit_offset), timeout_s)
        status, next_offset, min_offset, max_offset = outcome(response)
        messages = received(response, mq, sub) if status is PullStatus.FOUND else []
        return PullResult(status, next_offset, min_offset, max_offset, messages)


def outcome(response: RemotingCommand) -> tuple[PullStatus, int, int, int]:
    """A pull's status, next offset, min and max offsets; ClientError for a refusal."""
    status = _STATUS.get(response.code)
    if status is None:
        raise ClientError(response.remark or "pull refused", response.code)
    fields = response.ext_fields
    try:
        return (status, int(fields["nextBeginOffset"]), int(fields.get("minOffset", 0)),
                int(fields.get("maxOffset", 0)))
    except (KeyError, ValueError):
        raise ClientError(f"pull response without offsets: {fields}") from None


def received(response: RemotingCommand, mq: MessageQueue, sub: Subscription) -> list[MessageExt]:
    """The messages of a FOUND pull's answer that `sub` accepts; ClientError for a body
    that does not decode."""
    if not response.body:
        return []
    broker = mq.broker_name
    try:
        messages = [MessageExt(raw, broker) for raw in unpack_message_ext_records(response.body)]
    except (MessageFormatError, zlib.error) as exc:
        raise ClientError(f"bad pull body from {mq.broker_name}: {exc}") from None
    tags = sub.tags
    if tags is not None:
        messages = [m for m in messages if m.tags in tags]
    return messages
