"""stompman: an asyncio STOMP 1.2 client (run here on a fresh event loop per call)."""

from __future__ import annotations

import asyncio
import time
from importlib import metadata

import stompman

from ..base import Client, Consume, In, Out
from . import stomp_common as sc


class _Abort(Exception):
    """Leaves a `begin()` block: stompman aborts the transaction."""


class Stompman(Client):
    name = "stompman"
    protocol = "stomp"
    fields = sc.FIELDS
    lacks = dict(sc.LACKS)

    def version(self) -> str:
        return metadata.version("stompman")

    def _client(self, errors: list[str]) -> stompman.Client:
        host, port = self.ep.split(self.ep.stomp)
        login, passcode = (self.creds.user, self.creds.secret) if self.creds else ("", "")
        return stompman.Client([stompman.ConnectionParameters(host, port, login, passcode)],
                               heartbeat=stompman.Heartbeat(1000, 1000), connect_retry_attempts=1,
                               connect_timeout=5, on_error_frame=lambda f: errors.append(
                                   f.headers.get("message", "ERROR")))

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        errors: list[str] = []

        async def run() -> None:
            async with self._client(errors) as client:
                for m in msgs:
                    await client.send(m.body, sc.destination(topic), headers=sc.send_headers(m),
                                      receipt_timeout=10 if m is msgs[-1] or len(msgs) < 100 else None)
        asyncio.run(asyncio.wait_for(run(), 120))
        if errors:
            raise RuntimeError(f"ERROR frame: {errors[0]}")

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        errors: list[str] = []

        async def run() -> None:
            async with self._client(errors) as client:
                async with client.begin() as tx:
                    for m in commit:
                        await tx.send(m.body, sc.destination(topic), headers=sc.send_headers(m))
                try:
                    async with client.begin() as tx:
                        for m in abort:
                            await tx.send(m.body, sc.destination(topic), headers=sc.send_headers(m))
                        raise _Abort
                except _Abort:
                    pass
                await client.send(b"", sc.destination(topic + "_sync"), receipt_timeout=10)
        asyncio.run(asyncio.wait_for(run(), 60))
        if errors:
            raise RuntimeError(f"ERROR frame: {errors[0]}")

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        got: list[In] = []
        errors: list[str] = []

        async def handle(frame: stompman.MessageFrame) -> None:
            if c.n is not None and len(got) >= c.n:
                raise _Abort  # NACKed: left for the group's next consumer (through the retry path)
            got.append(sc.received(frame.body, dict(frame.headers)))
            last[0] = time.monotonic()
            if c.nack:
                raise _Abort

        last: list[float | None] = [None]

        async def run() -> None:
            async with self._client(errors) as client:
                sub = await client.subscribe(sc.destination(topic), handle, ack="client-individual",
                                             headers=sc.subscribe_headers(group, c.tag_filter, c.sql),
                                             on_suppressed_exception=lambda exc, frame: None,
                                             suppressed_exception_classes=(_Abort,))
                if c.ready is not None:
                    c.ready.set()
                started = time.monotonic()
                while not c.done(len(got), started, last[0]) and not errors:
                    await asyncio.sleep(0.05)
                await sub.unsubscribe()
        asyncio.run(run())
        if errors and not got:
            raise RuntimeError(f"ERROR frame: {errors[0]}")
        return got


CLIENT = Stompman
