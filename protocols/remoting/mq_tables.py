"""Maps keyed by MessageQueue, as RocketMQ's fastjson writes them into admin bodies.

TopicStatsTable, ConsumeStats and ResetOffsetBody hold `Map<MessageQueue, ...>`, and
fastjson writes such a key as the JSON object itself, which is not JSON:
``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5}}}``. Java
admin tools (mqadmin topicStatus, consumerProgress, resetOffsetByTime) read exactly that,
so the broker writes it; `loads` reads it back (for `rocketport admin`) by turning each
object key into a `MessageQueueKey`. Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from .lenient_json import LenientJSONError, loads_lenient


class MessageQueueKey(NamedTuple):
    topic: str
    broker_name: str
    queue_id: int


def encode_table(table: dict[MessageQueueKey, Any]) -> bytes:
    """The JSON-like text of a MessageQueue-keyed map (fastjson's key field order)."""
    items = (b"%s:%s" % (orjson.dumps({"brokerName": k.broker_name, "queueId": k.queue_id,
                                       "topic": k.topic}), orjson.dumps(v))
             for k, v in table.items())
    return b"{" + b",".join(items) + b"}"


def encode_body(fields: dict[str, Any], tables: dict[str, dict[MessageQueueKey, Any]]) -> bytes:
    """An admin body: plain ``fields`` plus MessageQueue-keyed ``tables``, keys sorted as
    fastjson sorts them."""
    parts = {**{k: orjson.dumps(v) for k, v in fields.items()},
             **{k: encode_table(v) for k, v in tables.items()}}
    return b"{" + b",".join(b'"%s":%s' % (k.encode(), parts[k]) for k in sorted(parts)) + b"}"


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Parse a body that may hold object keys; they become MessageQueueKey tuples.

    Raises LenientJSONError for anything else that is not (lenient) JSON.
    """
    return _restore_keys(loads_lenient(_quote_object_keys(bytes(data).decode("utf-8", "replace"))))


def _quote_object_keys(text: str) -> str:
    """Each `{...}` in a key position replaced by a JSON string holding its text."""
    out: list[str] = []
    stack: list[str] = []  # "{" or "["
    expect_key = False
    i, n, start = 0, len(text), 0
    while i < n:
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            expect_key = False
            continue
        if c == "{" and expect_key:
            end = _object_end(text, i)
            out.append(text[start:i])
            out.append(orjson.dumps(text[i:end]).decode())
            i = start = end
            expect_key = False
            continue
        if c in "{[":
            stack.append(c)
            expect_key = c == "{"
        elif c in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif c == ":":
            expect_key = False
        i += 1
    out.append(text[start:])
    return "".join(out)


def _string_end(text: str, i: int) -> int:
    """Index just past the string literal opening at ``i``."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    raise LenientJSONError("unterminated string")


def _object_end(text: str, i: int) -> int:
    """Index just past the balanced object opening at ``i``."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise LenientJSONError("unterminated object key")


def _restore_keys(value: Any) -> Any:
    if isinstance(value, list):
        return [_restore_keys(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {_queue_key(k): _restore_keys(v) for k, v in value.items()}


def _queue_key(key: str) -> Any:
    """A key that `_quote_object_keys` quoted, as a MessageQueueKey; others as they are."""
    if not key.startswith("{"):
        return key
    try:
        mq = orjson.loads(key)
        return MessageQueueKey(str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return key
