"""What every STOMP adapter shares: the n/a reasons and the frame mapping (docs/protocol-stomp.md:
SEND headers = properties, `x-tags` = TAGS, `x-keys` = KEYS, `x-delay` = delay in ms;
/queue/T with `x-group: G` = consumer group G on topic T)."""

from __future__ import annotations

from ..base import In, Out

LACKS = {
    "ordered": "STOMP has no ordering key: a /queue destination delivers across the topic's "
               "queues, so only one queue's order would be kept",
    "compression": "STOMP has no compression",
}
FIELDS = ("key", "tag", "props")  # a MESSAGE frame shows no timestamp
OWN = {"destination", "subscription", "message-id", "ack", "content-length", "content-type",
       "redelivered", "x-reconsume-times", "x-tags", "x-keys", "receipt"}


def destination(topic: str) -> str:
    return f"/queue/{topic}"


def send_headers(m: Out) -> dict[str, str]:
    headers = dict(m.props)
    if m.tag is not None:
        headers["x-tags"] = m.tag
    if m.key is not None:
        headers["x-keys"] = m.key
    if m.delay_s:
        headers["x-delay"] = str(m.delay_s * 1000)
    return headers


def subscribe_headers(group: str, tag_filter: str | None, sql: str | None) -> dict[str, str]:
    headers = {"x-group": group, "x-retry": "true"}  # a NACK takes RocketMQ's retry schedule
    if tag_filter:
        headers["x-tag-filter"] = tag_filter
    if sql:
        headers["selector"] = sql
    return headers


def received(body: bytes, headers: dict[str, str]) -> In:
    return In(body=body, key=headers.get("x-keys"), tag=headers.get("x-tags"),
              props={k: v for k, v in headers.items() if k not in OWN},
              redelivered=headers.get("redelivered") == "true")
