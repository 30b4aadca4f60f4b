"""What every AMQP 0-9-1 adapter shares: the n/a reasons and the mapping
(docs/protocol-amqp.md): a scenario's topic is a `topic` exchange, its group a queue bound to
it (`#`, or one binding per tag of a tag filter), the routing key = TAGS, headers = properties,
`x-delay` = delay in ms. Exchanges make their own 1-queue topics (publish order kept)."""

from __future__ import annotations

from ..base import Consume, In, Out

LACKS = {
    "sql92": "AMQP 0-9-1 has no selectors (headers exchanges match properties by equality only)",
    "compression": "AMQP 0-9-1 has no compression",
}
FIELDS = ("tag", "props")  # no message key; the born timestamp is not shown
EXCHANGE_TYPE = "topic"


def binding_keys(c: Consume) -> list[str]:
    if c.tag_filter:
        return [t.strip() for t in c.tag_filter.split("||")]
    return ["#"]


def headers(m: Out) -> dict[str, str]:
    h = dict(m.props)
    if m.delay_s:
        h["x-delay"] = str(m.delay_s * 1000)
    return h


def routing_key(m: Out) -> str:
    return m.tag or ""


def received(body: bytes, routing_key: str | None, hdrs: dict | None, redelivered: bool) -> In:
    props = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in (hdrs or {}).items()}
    return In(body=body, tag=routing_key or None, props=props, redelivered=redelivered)
