"""stomp.py: the most used Python STOMP client (threads, STOMP 1.2)."""

from __future__ import annotations

import threading
import time
from importlib import metadata

import stomp

from ..base import Client, Consume, In, Out
from . import stomp_common as sc


class _Listener(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.receipts: list[str] = []  # in order of arrival
        self.errors: list[str] = []
        self.frames: list = []

    def on_receipt(self, frame) -> None:
        with self.cond:
            self.receipts.append(frame.headers.get("receipt-id", ""))
            self.cond.notify_all()

    def on_error(self, frame) -> None:
        with self.cond:
            self.errors.append(frame.headers.get("message", "") or str(frame.body)[:100])
            self.cond.notify_all()

    def on_message(self, frame) -> None:
        with self.cond:
            self.frames.append(frame)
            self.cond.notify_all()


class StompPy(Client):
    name = "stomp.py"
    protocol = "stomp"
    fields = sc.FIELDS
    lacks = dict(sc.LACKS)

    def version(self) -> str:
        return metadata.version("stomp.py")

    def _connect(self) -> tuple[stomp.Connection12, _Listener]:
        host, port = self.ep.split(self.ep.stomp)
        conn = stomp.Connection12([(host, port)], heartbeats=(0, 0), auto_content_length=True,
                                auto_decode=False)
        listener = _Listener()
        conn.set_listener("interop", listener)
        if self.creds:
            conn.connect(self.creds.user, self.creds.secret, wait=True)
        else:
            conn.connect(wait=True)
        return conn, listener

    def _send_all(self, conn, listener: _Listener, topic: str, msgs: list[Out]) -> None:
        ids = [f"r{i}" for i in range(len(msgs))]
        for rid, m in zip(ids, msgs):
            conn.send(sc.destination(topic), m.body, headers=sc.send_headers(m), receipt=rid)
        self._wait_receipts(listener, ids)

    @staticmethod
    def _wait_receipts(listener: _Listener, ids: list[str]) -> None:
        deadline = time.monotonic() + 60
        missing = set(ids)
        seen = 0
        with listener.cond:
            while missing and not listener.errors and time.monotonic() < deadline:
                missing.difference_update(listener.receipts[seen:])  # only what is new
                seen = len(listener.receipts)
                if missing:
                    listener.cond.wait(max(0.0, deadline - time.monotonic()))
        if listener.errors:
            raise RuntimeError(f"ERROR frame: {listener.errors[0]}")
        if missing:
            raise RuntimeError(f"{len(missing)} receipts missing after 60 s")

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        conn, listener = self._connect()
        try:
            self._send_all(conn, listener, topic, msgs)
        finally:
            conn.disconnect()

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        conn, listener = self._connect()
        try:
            for msgs, end in ((commit, conn.commit), (abort, conn.abort)):
                tx = conn.begin()
                for m in msgs:
                    conn.send(sc.destination(topic), m.body, headers=sc.send_headers(m), transaction=tx)
                end(tx, receipt=f"end-{tx}")
                self._wait_receipts(listener, [f"end-{tx}"])
        finally:
            conn.disconnect()

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        conn, listener = self._connect()
        got: list[In] = []
        started, last = time.monotonic(), None
        try:
            conn.subscribe(sc.destination(topic), id="1", ack="client-individual",
                           headers=sc.subscribe_headers(group, c.tag_filter, c.sql))
            if c.ready is not None:
                c.ready.set()
            while not c.done(len(got), started, last):
                with listener.cond:
                    frames, listener.frames = listener.frames, []
                    if not frames:
                        listener.cond.wait(0.2)
                        continue
                for frame in frames:
                    if c.n is not None and len(got) >= c.n:
                        continue  # unacknowledged: redelivered to the group's next consumer
                    got.append(sc.received(frame.body, dict(frame.headers)))
                    last = time.monotonic()
                    ack_id = frame.headers.get("ack") or frame.headers.get("message-id")
                    if c.nack:
                        conn.nack(ack_id)
                    else:
                        conn.ack(ack_id)
            if listener.errors:
                raise RuntimeError(f"ERROR frame: {listener.errors[0]}")
        finally:
            conn.disconnect()
        return got


CLIENT = StompPy
