"""The JSON API's actions (POST under /api/): create or update a topic, reset a group's
committed offsets to a time, send a test message. Each is one facade call, as
RocketMQ's mqadmin updateTopic, resetOffsetByTime and sendMessage make it; the console asks
the user to confirm each before posting. Who may post is `HttpAccess.write_refusal`'s.

A bad body is a 400, a missing topic a 404, each ``{"error": why}``.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from rocketport.common.message import Message
from rocketport.core.broker import Broker

from .responses import ApiError
from .session import Request

MAX_TEST_BODY: Final = 32 << 10  # a test message's body (within the request body's bound)
PERMS: Final = (2, 4, 6)  # RocketMQ's PERM_WRITE, PERM_READ, both


class Actions:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def act(self, parts: list[str], request: Request) -> dict[str, Any]:
        body = _json_object(request.body)
        match parts:
            case ["topics"]:
                return await self.create_topic(body)
            case ["groups", group, "reset"]:
                return self.reset_group(group, body)
            case ["messages"]:
                return await self.send_message(body)
        raise ApiError(404, "no such action: POST /api/" + "/".join(parts))

    async def create_topic(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a topic or change its queue numbers and permission (mqadmin updateTopic)."""
        topic = _text(body, "topic")
        settings = {"read_queue_nums": _number(body, "readQueueNums", 1, 1024),
                    "write_queue_nums": _number(body, "writeQueueNums", 1, 1024)}
        if "perm" in body:
            if type(body["perm"]) is not int or body["perm"] not in PERMS:
                raise ApiError(400, "perm must be 2 (write), 4 (read) or 6 (both)")
            settings["perm"] = body["perm"]
        config = await self.broker.create_topic_ready(topic, **settings)
        return {"topic": config.topic_name, "readQueueNums": config.read_queue_nums,
                "writeQueueNums": config.write_queue_nums, "perm": config.perm}

    def reset_group(self, group: str, body: dict[str, Any]) -> dict[str, Any]:
        """Commit, for every queue of the topic, the first offset stored at or after
        ``timestamp`` (ms) for the group (mqadmin resetOffsetByTime, forced). A consumer
        connected now keeps reading from where it is until it reads its committed offsets
        again (a rebalance or a restart), and may commit over the reset meanwhile."""
        topic = _text(body, "topic")
        timestamp = _number(body, "timestamp", 0, 1 << 62)
        if timestamp is None:
            raise ApiError(400, "timestamp is required (ms since the epoch)")
        offsets = self.broker.reset_offsets_by_timestamp(group, topic, timestamp)
        return {"group": group, "topic": topic, "offsets": {str(q): o for q, o in sorted(offsets.items())}}

    async def send_message(self, body: dict[str, Any]) -> dict[str, Any]:
        """Store one message (a text body, optional keys and tags) on the topic."""
        topic = _text(body, "topic")
        if self.broker.get_topic(topic) is None:
            raise ApiError(404, f"no topic {topic!r} (create it first)")
        text = body.get("body", "")
        if not isinstance(text, str) or len(text.encode()) > MAX_TEST_BODY:
            raise ApiError(400, f"body must be text of at most {MAX_TEST_BODY} bytes")
        properties = {name: value for name, value in (("KEYS", body.get("keys")), ("TAGS", body.get("tags")))
                      if value}
        if not all(isinstance(value, str) for value in properties.values()):
            raise ApiError(400, "keys and tags must be text")
        result = await self.broker.put_message(Message(topic, text.encode(), properties))
        return {"topic": topic, "queueId": result.queue_id, "queueOffset": result.queue_offset,
                "offsetMsgId": result.msg_id}


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"{name} is required (text)")
    return value


def _number(body: dict[str, Any], name: str, low: int, high: int) -> int | None:
    """The integer ``name`` within [low, high]; None when absent or null."""
    value = body.get(name)
    if value is None:
        return None
    if type(value) is not int or not low <= value <= high:
        raise ApiError(400, f"{name} must be an integer from {low} to {high}")
    return value
