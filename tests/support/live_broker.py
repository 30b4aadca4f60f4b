"""A live broker with every enabled front-end on free loopback ports, in a thread.

Real clients (blocking libraries, or subprocesses whose crash must not take pytest down)
drive it from the test thread exactly as they would a remote broker; the server runs on
its own event loop in a background thread, and tests reach the Broker facade through
`LiveBroker.call`. Every wait on it is bounded.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import dataclass
from typing import Any

from rocketport.core.config import BrokerConfig
from rocketport.server import BrokerServer


@dataclass(slots=True)
class LiveBroker:
    server: BrokerServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    def endpoint(self, role: str) -> tuple[str, int]:
        """(host, port) of the listener with this role ("kafka", "name server", ...)."""
        for front_end in self.server.front_ends.values():
            for name, host, port in front_end.endpoints():
                if name == role:
                    return host, port
        raise LookupError(f"no {role} listener")

    @property
    def namesrv(self) -> str:
        return "%s:%d" % self.endpoint("name server")

    @property
    def addr(self) -> str:
        return self.server.front_ends["remoting"].broker_addr()

    @property
    def bootstrap(self) -> str:
        return "%s:%d" % self.endpoint("kafka")

    @property
    def port(self) -> int:
        """The Kafka port."""
        return self.endpoint("kafka")[1]

    def call(self, fn: Any, *args: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine, or ``fn(*args)`` (sync or async), on the broker's loop."""
        async def run() -> Any:
            result = fn(*args) if callable(fn) else fn
            return await result if inspect.isawaitable(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def run(self, fn: Any, *args: Any) -> Any:
        """Run a plain function on the broker's loop (the facade is not thread-safe)."""
        return self.call(fn, *args)

    def stop(self) -> None:
        try:
            self.call(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
            if not self.thread.is_alive():
                self.loop.close()


def new_loop(kind: str = "asyncio") -> asyncio.AbstractEventLoop:
    """uvloop (what ``rocketport broker`` runs on) or a plain selector loop; never the loop of
    whatever event-loop policy another test module installed (trio-asyncio's, for one)."""
    if kind == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.SelectorEventLoop()


def start_live_broker(config: BrokerConfig, loop_kind: str = "asyncio") -> LiveBroker:
    """Start a BrokerServer for ``config`` (ports 0 = free ports) on a background loop."""
    loop = new_loop(loop_kind)
    thread = threading.Thread(target=loop.run_forever, name="live-broker", daemon=True)
    thread.start()
    try:
        server = asyncio.run_coroutine_threadsafe(_build(config), loop).result(30)
        live = LiveBroker(server, loop, thread)
        live.call(server.start(), timeout=60)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        raise
    return live


async def _build(config: BrokerConfig) -> BrokerServer:
    return BrokerServer(config)  # built on its loop: sessions and events bind to it
