"""What the AMQP parity scripts share: a pika connection to a peer, bounded waits, and the
observable part of a broker's close (its reply code and the constant that starts its text:
RabbitMQ's texts name queues and vhosts in its own words; clients branch on the code)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pika
import pika.exceptions

from .harness import Peer

WAIT_S = 10.0  # the longest any script waits for one thing


@contextmanager
def connection(peer: Peer, **params: Any) -> Iterator[pika.BlockingConnection]:
    parameters = pika.URLParameters(peer.url)
    for name, value in params.items():
        setattr(parameters, name, value)
    conn = pika.BlockingConnection(parameters)
    try:
        yield conn
    finally:
        if conn.is_open:
            conn.close()


def closed(error: BaseException) -> tuple[str, int, str]:
    """(exception type, reply code, the text's constant): what a close tells a client."""
    code, text = error.args[0], str(error.args[1])
    return type(error).__name__, code, text.split(" - ")[0]


def get(channel: Any, queue: str, timeout: float = WAIT_S) -> tuple[Any, Any, bytes] | None:
    """basic.get (auto ack) polled until a message comes or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is not None or time.monotonic() >= deadline:
            return None if method is None else (method, properties, body)
        channel.connection.sleep(0.02)


def get_unacked(channel: Any, queue: str, timeout: float = WAIT_S) -> tuple[Any, Any, bytes]:
    """basic.get without auto ack, polled until a message comes (an assertion error after
    ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=False)
        if method is not None:
            return method, properties, body
        if time.monotonic() >= deadline:
            raise AssertionError(f"nothing in {queue}")
        channel.connection.sleep(0.02)


def drain(channel: Any, queue: str) -> list[bytes]:
    """Every body basic.get returns now (auto ack), in order; bounded by a count."""
    bodies = []
    for _ in range(1000):
        method, _, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            break
        bodies.append(body)
    return bodies


def wait_for(connection: pika.BlockingConnection, done: Any, timeout: float = WAIT_S) -> bool:
    """Process the connection's events until ``done()`` or ``timeout``."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        connection.process_data_events(time_limit=0.05)
    return bool(done())
