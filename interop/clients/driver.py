"""Adapters whose client runs in a driver subprocess (C++, Node.js, Java, a CLI).

The driver reads one JSON request on its stdin and prints JSON lines: {"ready": true} once
subscribed, {"msg": {...}} per delivery, {"error": "..."} on failure; a later "stop" line on
stdin asks it to close cleanly (committing offsets). Bodies travel base64-encoded so that
they stay byte-exact. `interop/drivers/` holds the drivers.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import threading
import time
from abc import abstractmethod
from pathlib import Path

from ..base import Client, Consume, In, Out

DRIVERS = Path(__file__).resolve().parents[1] / "drivers"
CACHE = Path(__file__).resolve().parents[2] / ".cache"


def out_json(m: Out) -> dict:
    return {"body": base64.b64encode(m.body).decode(), "key": m.key, "tag": m.tag,
            "props": m.props, "delay_s": m.delay_s}


def in_from_json(d: dict) -> In:
    return In(body=base64.b64decode(d["body"]), key=d.get("key") or None, tag=d.get("tag") or None,
              props=d.get("props") or {}, timestamp_ms=d.get("ts"),
              redelivered=bool(d.get("redelivered")))


class DriverClient(Client):
    """Subclasses give `command()`; requests carry the endpoints and credentials."""

    @abstractmethod
    def command(self) -> list[str]:
        """The driver's command line."""

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def _request(self, request: dict) -> dict:
        creds = {"user": self.creds.user, "secret": self.creds.secret} if self.creds else None
        return {**request, "namesrv": self.ep.namesrv, "kafka": self.ep.kafka,
                "stomp": self.ep.stomp, "amqp": self.ep.amqp, "creds": creds}

    def _start(self, request: dict) -> tuple[subprocess.Popen, queue.Queue]:
        proc = subprocess.Popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=None, env=self.env(), text=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(self._request(request)) + "\n")
        proc.stdin.flush()
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            for line in proc.stdout:
                if line.startswith("{"):
                    try:
                        lines.put(json.loads(line))
                    except ValueError:
                        pass
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()
        return proc, lines

    @staticmethod
    def _finish(proc: subprocess.Popen, timeout: float = 30) -> None:
        try:
            proc.stdin.write("stop\n")
            proc.stdin.flush()
            proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def _run(self, request: dict, timeout: float = 120) -> None:
        """A request that ends by itself (produce, transaction): wait for {"done"} or an error."""
        proc, lines = self._start(request)
        deadline = time.monotonic() + timeout
        error = None
        try:
            while time.monotonic() < deadline:
                try:
                    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if line is None:
                    break
                if "error" in line:
                    error = line["error"]
                if "done" in line:
                    break
        finally:
            self._finish(proc)
        if error:
            raise RuntimeError(error)
        if proc.returncode != 0:
            raise RuntimeError(f"driver exited {proc.returncode}")

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        self._run({"cmd": "produce", "topic": topic, "msgs": [out_json(m) for m in msgs],
                   "ordered": ordered, "compression": compression})

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        self._run({"cmd": "transaction", "topic": topic, "commit": [out_json(m) for m in commit],
                   "abort": [out_json(m) for m in abort]})

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        proc, lines = self._start({"cmd": "consume", "topic": topic, "group": group, "n": c.n,
                                   "tag_filter": c.tag_filter, "sql": c.sql, "nack": c.nack,
                                   "orderly": c.orderly})
        got: list[In] = []
        started, last = time.monotonic(), None
        error = None
        try:
            while not c.done(len(got), started, last):
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if line is None:
                    break
                if "ready" in line and c.ready is not None:
                    c.ready.set()
                if "msg" in line:
                    got.append(in_from_json(line["msg"]))
                    last = time.monotonic()
                if "error" in line:
                    error = line["error"]
                    break
        finally:
            self._finish(proc)
        if error and not got:
            raise RuntimeError(error)
        return got
