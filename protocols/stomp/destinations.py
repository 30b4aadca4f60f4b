"""STOMP destination strings to Rocketport topics, tags and consumer groups.

The forms are RabbitMQ's and ActiveMQ's, mapped onto one store (docs/protocol-stomp.md has
the table):

- ``/queue/{name}`` and ``/amq/queue/{name}``: topic ``name``, competing consumers in one
  group (``x-group``, else ``stomp-queue-{name}``) that starts at the first offset, so a
  queue keeps what was sent before its first subscriber.
- ``/topic/{name}``: topic ``name``; each subscription is its own group starting at the end
  (``stomp-sub-{random}``, dropped when the subscription ends), or, when durable
  (``x-durable-name`` / ``activemq.subscriptionName`` / RabbitMQ's ``durable:true`` with
  ``id``), the group of that name, which keeps its offsets across connections.
- ``/exchange/{name}[/{routing-key}]``: topic ``name``; the routing key is the TAGS of what
  is sent and the tag filter of a subscription (``#`` or none: every tag), as an AMQP
  client of the same store sees it. Wildcard patterns do not map onto tags and are refused.
- ``/temp-queue/{name}``: a queue private to the connection (topic
  ``stomp-temp-{connection}-{name}``); a ``reply-to`` naming it is rewritten to the
  ``/queue/...`` form other clients can send to.

Anything else is a `DestinationError` whose text names these forms. Pure functions, and
`Destinations`, one connection's parsed destinations (a pipelining client names the same
one frame after frame).
"""

from __future__ import annotations

from dataclasses import dataclass
import secrets
from typing import Final

from rocketport.core.errors import InvalidTopicName
from rocketport.core.facade.types import validate_topic

QUEUE: Final = "queue"
TOPIC: Final = "topic"

_CACHED_MAX: Final = 1024  # parsed destinations kept per connection
FORMS: Final = "/queue/NAME, /topic/NAME, /amq/queue/NAME, /exchange/NAME[/KEY] or /temp-queue/NAME"


class DestinationError(ValueError):
    """A destination (or group name) that maps onto no topic; the text tells the client why."""


@dataclass(frozen=True, slots=True)
class Destination:
    kind: str  # QUEUE: one group shared by its subscribers; TOPIC: a group per subscription
    topic: str
    tag: str | None = None  # /exchange/X/KEY: the TAGS sent, and the filter subscribed with


def _name(text: str, what: str) -> str:
    try:
        validate_topic(text)
    except InvalidTopicName as exc:
        raise DestinationError(f"{what} {text!r}: {exc}") from None
    return text


def parse(destination: str, temp_prefix: str) -> Destination:
    """``temp_prefix`` names this connection's temporary queues (``stomp-temp-{id}``)."""
    if destination.startswith("/queue/"):
        return Destination(QUEUE, _name(destination[7:], "queue"))
    if destination.startswith("/amq/queue/"):
        return Destination(QUEUE, _name(destination[11:], "queue"))
    if destination.startswith("/topic/"):
        return Destination(TOPIC, _name(destination[7:], "topic"))
    if destination.startswith("/temp-queue/"):
        return Destination(QUEUE, _name(f"{temp_prefix}-{destination[12:]}", "temporary queue"))
    if destination.startswith("/exchange/"):
        name, _, key = destination[10:].partition("/")
        if key in ("", "#"):
            return Destination(TOPIC, _name(name, "exchange"))
        if "*" in key or "#" in key:
            raise DestinationError(f"routing key pattern {key!r}: only an exact key or '#' maps onto tags")
        return Destination(TOPIC, _name(name, "exchange"), key)
    raise DestinationError(f"unsupported destination {destination[:200]!r}; use {FORMS}")


class Destinations:
    """One connection's destinations: its temporary queues' prefix and what it parsed."""

    __slots__ = ("temp_prefix", "_parsed")

    def __init__(self) -> None:
        self.temp_prefix = f"stomp-temp-{secrets.token_hex(4)}"
        self._parsed: dict[str, Destination] = {}

    def of(self, headers: dict[str, str]) -> tuple[str, Destination]:
        """A frame's destination header, as written and parsed (a `DestinationError` when
        it is missing or maps onto no topic)."""
        text = headers.get("destination")
        if not text:
            raise DestinationError("the frame has no destination header")
        dest = self._parsed.get(text)
        if dest is None:
            if len(self._parsed) >= _CACHED_MAX:
                self._parsed.clear()
            dest = self._parsed[text] = parse(text, self.temp_prefix)
        return text, dest


def reply_to(value: str, temp_prefix: str) -> str:
    """A SEND's reply-to as other clients can use it: a temporary queue's real name."""
    if value.startswith("/temp-queue/"):
        return "/queue/" + parse(value, temp_prefix).topic
    return value


def queue_group(dest: Destination, requested: str | None) -> str:
    return group_name(requested) if requested else f"stomp-queue-{dest.topic}"


def group_name(text: str) -> str:
    """A client-chosen group name; it must make a valid ``%RETRY%`` topic name too."""
    try:
        validate_topic(text)
    except InvalidTopicName as exc:
        raise DestinationError(f"group {text!r}: {exc}") from None
    return text
