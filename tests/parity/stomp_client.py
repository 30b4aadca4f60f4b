"""stomp.py for differential scripts: a connection whose listener records every frame it
receives in arrival order, and bounded waits on that record."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import stomp
from stomp.utils import Frame

from .harness import Peer

WAIT_S = 10.0


@dataclass(slots=True)
class Event:
    """One frame as received: its command (MESSAGE, RECEIPT, ERROR), headers and body."""

    command: str
    headers: dict[str, str]
    body: Any


@dataclass
class Recorder(stomp.ConnectionListener):
    """Every MESSAGE, RECEIPT, ERROR and the disconnection, in the order they arrived."""

    events: list[Event] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def _add(self, command: str, frame: Frame | None) -> None:
        with self._changed:
            self.events.append(Event(command, dict(frame.headers) if frame else {},
                                     frame.body if frame else None))
            self._changed.notify_all()

    def on_message(self, frame: Frame) -> None:
        self._add("MESSAGE", frame)

    def on_receipt(self, frame: Frame) -> None:
        self._add("RECEIPT", frame)

    def on_error(self, frame: Frame) -> None:
        self._add("ERROR", frame)

    def on_disconnected(self) -> None:
        self._add("DISCONNECTED", None)

    def wait(self, done: Callable[[list[Event]], bool], timeout: float = WAIT_S) -> list[Event]:
        """The events once ``done(events)`` holds; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s; got {self.summary()}")
                self._changed.wait(left)
            return list(self.events)

    def wait_receipt(self, receipt: str, timeout: float = WAIT_S) -> list[Event]:
        return self.wait(lambda events: any(e.command == "RECEIPT" and e.headers.get("receipt-id") == receipt
                                            for e in events), timeout)

    def wait_messages(self, count: int, timeout: float = WAIT_S) -> list[Event]:
        """The MESSAGE events once there are at least ``count``."""
        self.wait(lambda events: sum(e.command == "MESSAGE" for e in events) >= count, timeout)
        return self.messages()

    def messages_up_to(self, count: int, timeout: float = WAIT_S) -> list[Event]:
        """The MESSAGE events once there are ``count``, or those that came within ``timeout``:
        for a case whose observation is how many a broker delivers."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(e.command == "MESSAGE" for e in self.events) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
        return self.messages()

    def messages(self) -> list[Event]:
        with self._changed:
            return [e for e in self.events if e.command == "MESSAGE"]

    def settle(self, quiet: float = 0.5, timeout: float = WAIT_S) -> list[Event]:
        """The events once none has arrived for ``quiet`` seconds (to see that nothing more
        comes, e.g. no second delivery): bounded by ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            seen = len(self.events)
            while time.monotonic() < deadline:
                self._changed.wait(min(quiet, max(0.0, deadline - time.monotonic())))
                if len(self.events) == seen:
                    break
                seen = len(self.events)
            return list(self.events)

    def summary(self) -> list[tuple[str, Any]]:
        """(command, body or receipt-id/message) of each event: the usual observation."""
        with self._changed:
            return [_short(e) for e in self.events]


def _short(event: Event) -> tuple[str, Any]:
    if event.command == "RECEIPT":
        return "RECEIPT", event.headers.get("receipt-id")
    if event.command == "ERROR":
        return "ERROR", event.headers.get("message")
    return event.command, event.body


def ack_headers(version: str, headers: dict[str, str]) -> dict[str, str]:
    """What an ACK or NACK of the message with these MESSAGE headers carries."""
    if version == "1.2":
        return {"id": headers["ack"]}
    return {"message-id": headers["message-id"], "subscription": headers["subscription"]}


def nack(conn: stomp.Connection, version: str, message: Event, **headers: str) -> None:
    conn.send_frame("NACK", {**ack_headers(version, message.headers), **headers})


def ack(conn: stomp.Connection, version: str, message: Event, **headers: str) -> None:
    conn.send_frame("ACK", {**ack_headers(version, message.headers), **headers})


@contextmanager
def connected(peer: Peer, version: str = "1.2", **options: Any) -> Iterator[tuple[stomp.Connection, Recorder]]:
    """A connected stomp.py connection (guest/guest, vhost /) and its recorder; disconnected
    on leaving if still connected."""
    cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}[version]
    options = {"auto_decode": False, **options}  # bodies as bytes
    if version != "1.0":  # RabbitMQ reads the host header as the virtual host
        options = {"heartbeats": (0, 0), "vhost": "/", **options}
    conn = cls([peer.stomp], **options)
    recorder = Recorder()
    conn.set_listener("recorder", recorder)
    conn.connect("guest", "guest", wait=True)
    try:
        yield conn, recorder
    finally:
        if conn.is_connected():
            conn.disconnect()
