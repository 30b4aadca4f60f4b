"""Helpers for the STOMP tests: stomp.py connections to a live broker, a raw socket
client for byte-level cases, and reading a topic back through the Broker facade."""

from __future__ import annotations

import socket
import threading
import time

import stomp

from rocketport.common.message import MessageExt
from tests.support.live_broker import LiveBroker

TIMEOUT = 20.0


def endpoint(live: LiveBroker, websocket: bool = False) -> tuple[str, int]:
    return live.endpoint("stomp (websocket)" if websocket else "stomp")


class Recorder(stomp.ConnectionListener):
    """What a stomp.py connection received: receipts, messages (headers, body), errors."""

    def __init__(self) -> None:
        self.receipts: list[str] = []
        self.messages: list[tuple[dict, bytes]] = []
        self.errors: list[tuple[dict, bytes]] = []
        self.disconnected = False
        self._cond = threading.Condition()

    def _add(self, items: list, item) -> None:
        with self._cond:
            items.append(item)
            self._cond.notify_all()

    def on_receipt(self, frame) -> None:
        self._add(self.receipts, frame.headers["receipt-id"])

    def on_message(self, frame) -> None:
        self._add(self.messages, (dict(frame.headers), frame.body))

    def on_error(self, frame) -> None:
        self._add(self.errors, (dict(frame.headers), frame.body))

    def on_disconnected(self) -> None:
        with self._cond:
            self.disconnected = True
            self._cond.notify_all()

    def wait(self, predicate, timeout: float = TIMEOUT) -> bool:
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def wait_receipt(self, receipt: str, timeout: float = TIMEOUT) -> None:
        assert self.wait(lambda: receipt in self.receipts, timeout), f"no receipt {receipt}"

    def wait_messages(self, count: int, timeout: float = TIMEOUT) -> list[tuple[dict, bytes]]:
        self.wait(lambda: len(self.messages) >= count, timeout)
        return list(self.messages)


def connect(live: LiveBroker, version: str = "1.2", **kwargs) -> tuple[stomp.Connection, Recorder]:
    cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}[version]
    beats = kwargs.pop("heartbeats", (0, 0))
    options = {"timeout": TIMEOUT, "auto_decode": False}
    if version != "1.0":
        options["heartbeats"] = beats
    conn = cls([endpoint(live)], **options)
    listener = Recorder()
    conn.set_listener("test", listener)
    conn.connect(wait=True, **kwargs)
    return conn, listener


def stored(live: LiveBroker, topic: str) -> list[MessageExt]:
    """Every message of ``topic``, queue by queue, as the store holds them (DLQ topics too)."""
    def read() -> list[MessageExt]:
        broker = live.server.broker
        out = []
        config = broker.topics.get(topic)
        for qid in range(config.read_queue_nums if config is not None else 0):
            offset = 0
            while True:  # a read returns at most the store's transfer limit
                result = broker.store.get_messages(topic, qid, offset, 10_000)
                messages = result.messages()
                out.extend(messages)
                if not messages or result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
        return out
    return live.call(read)


class RawClient:
    """A plain socket speaking STOMP bytes, for what no client library would send."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=TIMEOUT)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self) -> bytes:
        """The next frame (heart-beat EOLs skipped), or b"" once the server has closed."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            self.buffer = self.buffer.lstrip(b"\r\n")
            head_end = self.buffer.find(b"\n\n")
            if head_end >= 0:
                head = self.buffer[:head_end].decode()
                length = next((int(line[15:]) for line in head.split("\n")
                               if line.startswith("content-length:")), None)
                end = head_end + 2 + length if length is not None else self.buffer.find(b"\0", head_end)
                if 0 <= end < len(self.buffer):
                    frame, self.buffer = self.buffer[:end + 1], self.buffer[end + 1:]
                    return frame
            chunk = self.sock.recv(65536)
            if not chunk:
                return b""
            self.buffer += chunk
        raise TimeoutError("no frame")

    def closed(self) -> bool:
        """True when the server closes the connection (after what it sent)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return True
            if not chunk:
                return True
            self.buffer += chunk
        return False

    def close(self) -> None:
        self.sock.close()
