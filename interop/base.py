"""The adapter interface every client implements, and the records scenarios exchange.

A scenario speaks in `Out` (what to send) and `In` (what a consumer saw). An adapter maps
them onto its client's API: a Kafka key, a remoting KEYS property, a STOMP `x-keys` header.
Adapters raise `NotApplicable` for what their client or protocol lacks, and any other
exception for what failed.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field


class NotApplicable(Exception):
    """The client or its protocol has no such feature (the cell is "n/a")."""


class Missing(Exception):
    """The client is not installed or cannot be built here (every cell says why)."""


class Failed(AssertionError):
    """A scenario's check did not hold (the cell is "fail: reason")."""


@dataclass(slots=True, frozen=True)
class Endpoints:
    """Where one broker listens (host:port strings)."""

    namesrv: str
    remoting: str
    kafka: str
    stomp: str
    amqp: str

    @staticmethod
    def split(addr: str) -> tuple[str, int]:
        host, _, port = addr.rpartition(":")
        return host, int(port)


@dataclass(slots=True)
class Out:
    """A message to send. `delay_s` asks for delivery that many seconds later."""

    body: bytes
    key: str | None = None
    tag: str | None = None
    props: dict[str, str] = field(default_factory=dict)
    delay_s: int | None = None


@dataclass(slots=True)
class In:
    """A delivered message as the consumer saw it; None where the protocol shows nothing."""

    body: bytes
    key: str | None = None
    tag: str | None = None
    props: dict[str, str] = field(default_factory=dict)
    timestamp_ms: int | None = None
    received_at: float = field(default_factory=time.time)
    redelivered: bool = False


@dataclass(slots=True)
class Consume:
    """How long and how much to consume.

    Stops at `n` messages (then commits), after `idle` seconds without one (once one came),
    at `timeout`, or when `stop` is set. `nack` refuses every delivery (the retry path).
    """

    n: int | None = None
    timeout: float = 30.0
    idle: float | None = None
    tag_filter: str | None = None
    sql: str | None = None
    nack: bool = False
    orderly: bool = False
    stop: threading.Event | None = None
    ready: threading.Event | None = None  # set once subscribed (two-consumer scenarios)

    def done(self, got: int, started: float, last: float | None) -> bool:
        now = time.monotonic()
        if self.n is not None and got >= self.n:
            return True
        if self.stop is not None and self.stop.is_set():
            return True
        if self.idle is not None and last is not None and now - last >= self.idle:
            return True
        return now - started >= self.timeout


@dataclass(slots=True)
class Credentials:
    user: str
    secret: str


class Client(ABC):
    """One client library. Subclasses set the class attributes and implement produce/consume.

    `protocol` is "remoting", "kafka", "stomp" or "amqp". `lacks` maps a scenario to why the
    client or protocol has no such feature ("n/a" in the table, with the reason in the doc).
    `fields` names the message fields its protocol carries both ways (the cross-protocol
    check compares those two sides share).
    """

    name: str = ""
    protocol: str = ""
    lacks: dict[str, str] = {}
    fields: tuple[str, ...] = ("key", "tag", "props", "timestamp")  # what the protocol shows
    codecs: tuple[str, ...] = ()  # the compression scenario's codecs
    precreate: bool = True  # False: the client makes its own topics (AMQP exchanges: 1 queue)

    def __init__(self, ep: Endpoints, creds: Credentials | None = None) -> None:
        self.ep = ep
        self.creds = creds

    @abstractmethod
    def version(self) -> str:
        ...

    def check(self) -> None:
        """Raise Missing when the client cannot run here; install or build it if needed."""

    def prepare(self, topic: str, group: str, c: Consume) -> None:
        """Called before anything is produced to `topic` for a consumer `group` (AMQP binds
        its queue here: a binding sees only what is published after it)."""

    @abstractmethod
    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        """Send and wait for every acknowledgement; raise on any failure."""

    @abstractmethod
    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        """Consume as `c` says and return the deliveries in order of arrival."""

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        """Send `commit` in a committed transaction and `abort` in an aborted one."""
        raise NotApplicable("the client has no transactions")
