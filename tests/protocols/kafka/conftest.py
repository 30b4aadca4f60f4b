"""A live broker for the Kafka client tests: a BrokerServer on 127.0.0.1, ephemeral port.

The server runs in a background thread with its own event loop, so the (blocking) Kafka
client libraries drive it from the test thread exactly as they would a remote broker, and
tests can still reach the Broker facade through :meth:`LiveBroker.call`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from rocketport.core.config import BrokerConfig, ProtocolConfig

from rocketport.server import BrokerServer


@dataclass(slots=True)
class LiveBroker:
    server: BrokerServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def bootstrap(self) -> str:
        assert self.server.front_ends['kafka'] is not None
        return f"127.0.0.1:{self.server.front_ends['kafka'].port}"

    @property
    def port(self) -> int:
        assert self.server.front_ends['kafka'] is not None
        return self.server.front_ends['kafka'].port

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        """Run a coroutine on the broker's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn, *args) -> Any:
        """Run a plain function on the broker's loop (the facade is not thread-safe)."""
        async def wrapper():
            return fn(*args)
        return self.call(wrapper())

    def stop(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    """uvloop (what ``rocketport broker`` runs on) or a plain selector loop; never the loop of
    whatever event-loop policy another test module installed (trio-asyncio's, for one)."""
    if kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.new_event_loop()
    return asyncio.SelectorEventLoop()


def start_broker(store_dir: str, loop_kind: str = "uvloop", **overrides: Any) -> LiveBroker:
    config = BrokerConfig(
        store_path_root_dir=store_dir,
        mapped_file_size_commit_log=64 << 20,
        default_topic_queue_nums=4,
        kafka=ProtocolConfig(True, 0, "127.0.0.1"),
        # ephemeral remoting and name-server ports too: a broker already running on the
        # defaults (10911, 9876) must not fail these tests
        **{"listen_port": 0, "namesrv": ProtocolConfig(True, 0, "127.0.0.1"), **overrides},
    )
    server = BrokerServer(config)
    loop = new_loop(loop_kind)
    thread = threading.Thread(target=loop.run_forever, name="broker-loop", daemon=True)
    thread.start()
    live = LiveBroker(server, loop, thread)
    live.call(server.start())
    return live


@pytest.fixture
def live_broker(tmp_path) -> Iterator[LiveBroker]:
    live = start_broker(str(tmp_path / "store"))
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture(params=["uvloop", "asyncio"])
def any_loop_broker(request, tmp_path) -> Iterator[LiveBroker]:
    """The session's transport handling differs between loops: session tests run on both."""
    live = start_broker(str(tmp_path / "store"), request.param)
    try:
        yield live
    finally:
        live.stop()
