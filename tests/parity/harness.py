"""The differential harness: one client script, run against RabbitMQ and against Rocketport,
and what each observed compared.

RabbitMQ is the reference for Rocketport's AMQP 0-9-1 and STOMP front-ends (issue
[rabbitmq-parity]): where the two differ on what a client can see, Rocketport is wrong
unless docs/protocol-amqp.md or docs/protocol-stomp.md says why it cannot match.

How to add a case
-----------------
Write a script: a plain function taking a `Peer` (host, ``amqp_port``, ``stomp_port``,
``url``, ``ws_url``) that drives a real client (pika, aio-pika, kombu, stomp.py,
websockets) and returns its
*observations*: a list of plain values (deliveries in order, header values with their
Python types through `typed`, message counts, receipt ids, error codes and texts). Name
queues, exchanges and destinations with ``peer.name("work")``: the same name on both brokers
within one comparison, a fresh one per comparison (both brokers live for the whole session).
Every wait in the script is bounded (``timeout=`` on gets, `Recorder.wait` for STOMP).
Then, in a test taking the ``parity`` fixture (tests/support/rabbitmq.py; the ``rabbitmq``
marker comes with it)::

    def test_basic_get_counts(parity):
        parity.assert_same(get_counts)           # equal observations, or a diff of the two

    def test_something_that_differs_on_purpose(parity):
        rabbit, rocket = parity.observe(script)  # both lists, to assert on by hand

The script runs on RabbitMQ first: if it raises there the script is wrong, and the test
fails with that traceback. If it raises on Rocketport only, the test fails showing both.
Keep scripts deterministic: observe what the protocol promises (order within one queue,
counts after a bounded wait for them), never timings.
"""

from __future__ import annotations

import dataclasses
import itertools
import pprint
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Script = Callable[..., list[Any]]
_counter = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Peer:
    """One broker as a script sees it."""

    broker: str  # "rabbitmq" or "rocketport": for messages only, never for branching
    host: str
    amqp_port: int
    stomp_port: int
    prefix: str = "parity"
    ws_port: int = 0  # STOMP over WebSocket (RabbitMQ's Web-STOMP), path /ws

    @property
    def url(self) -> str:
        """An AMQP URL with RabbitMQ's default account (guest/guest, vhost /)."""
        return f"amqp://guest:guest@{self.host}:{self.amqp_port}/%2F"

    @property
    def stomp(self) -> tuple[str, int]:
        return self.host, self.stomp_port

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.ws_port}/ws"

    def name(self, suffix: str = "q") -> str:
        """A queue/exchange/destination name unique to this comparison, equal on both peers."""
        return f"{self.prefix}.{suffix}"


class ScriptFailed(AssertionError):
    pass


def typed(value: Any) -> tuple[str, Any]:
    """A value with its Python type's name, so that 1, "1" and True compare unequal."""
    if isinstance(value, dict):
        return "dict", {k: typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [typed(v) for v in value]
    return type(value).__name__, value


@dataclass(slots=True)
class Differential:
    """The ``parity`` fixture: a script run on both peers, RabbitMQ first."""

    rabbitmq: Peer
    rocketport: Peer
    test_name: str

    def _prefix(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.test_name).strip("-")[-60:]
        return f"{slug}.{next(_counter)}"

    def observe(self, script: Script, *args: Any) -> tuple[list[Any], list[Any]]:
        """(RabbitMQ's observations, Rocketport's) of ``script(peer, *args)``."""
        prefix = self._prefix()
        rabbit = self._run(dataclasses.replace(self.rabbitmq, prefix=prefix), script, args, None)
        rocket = self._run(dataclasses.replace(self.rocketport, prefix=prefix), script, args, rabbit)
        return rabbit, rocket

    def assert_same(self, script: Script, *args: Any) -> list[Any]:
        """Rocketport observes what RabbitMQ observes; returns the observations."""
        rabbit, rocket = self.observe(script, *args)
        if rabbit != rocket:
            raise AssertionError(f"{script.__name__}: Rocketport differs from RabbitMQ\n"
                                 + _diff(rabbit, rocket))
        return rabbit

    @staticmethod
    def _run(peer: Peer, script: Script, args: tuple[Any, ...], reference: list[Any] | None) -> list[Any]:
        try:
            observed = script(peer, *args)
        except Exception as e:
            where = "RabbitMQ (the script is wrong)" if reference is None else "Rocketport only"
            shown = "" if reference is None else "RabbitMQ observed:\n" + pprint.pformat(reference) + "\n"
            raise ScriptFailed(f"{script.__name__} raised on {where}:\n{shown}"
                               + "".join(traceback.format_exception(e))) from e
        if not isinstance(observed, list):
            raise ScriptFailed(f"{script.__name__} must return a list of observations, not {observed!r}")
        return observed


def _diff(rabbit: list[Any], rocket: list[Any]) -> str:
    lines = []
    for i in range(max(len(rabbit), len(rocket))):
        a = rabbit[i] if i < len(rabbit) else "<missing>"
        b = rocket[i] if i < len(rocket) else "<missing>"
        mark = "  " if a == b else "!!"
        lines.append(f"{mark} [{i}] rabbitmq:   {a!r}")
        if a != b:
            lines.append(f"{mark} [{i}] rocketport: {b!r}")
    return "\n".join(lines)
