"""A live broker (remoting listener + embedded name server) on free ports, in a thread.

Real clients run in subprocesses (the C++ client is a C library: a crash must not take
pytest down), so the broker runs on its own event loop in a background thread for the
duration of a test; every wait on it is bounded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.protocols.remoting import RemotingCommand, RemotingConnection, encode_command
from rocketport.server import BrokerServer


@dataclass(slots=True)
class LiveBroker:
    server: BrokerServer
    loop: asyncio.AbstractEventLoop

    @property
    def namesrv(self) -> str:
        listener = self.server.front_ends["remoting"].namesrv_listener
        assert listener is not None
        return f"127.0.0.1:{listener.port}"

    @property
    def addr(self) -> str:
        return self.server.front_ends["remoting"].broker_addr()

    def call(self, fn, *args, timeout: float = 10.0):
        """Run ``fn(*args)`` on the broker's loop (sync functions or coroutine functions)."""
        async def run():
            result = fn(*args)
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)


def new_loop() -> asyncio.AbstractEventLoop:
    """A plain asyncio loop, whatever policy another test (trio-asyncio) installed."""
    return asyncio.SelectorEventLoop()


def run_async(coro) -> object:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def start_live_broker(config: BrokerConfig) -> tuple[LiveBroker, threading.Thread]:
    loop = new_loop()
    started = threading.Event()
    holder: dict[str, object] = {}

    def run() -> None:
        async def boot() -> None:
            server = BrokerServer(config)
            await server.start()
            holder["server"] = server

        try:
            loop.run_until_complete(boot())
        except BaseException as exc:  # surfaced to the test below
            holder["error"] = exc
            started.set()
            return
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="live-broker", daemon=True)
    thread.start()
    assert started.wait(30), "broker did not start"
    if "error" in holder:
        raise holder["error"]  # type: ignore[misc]
    return LiveBroker(holder["server"], loop), thread  # type: ignore[arg-type]


def stop_live_broker(live: LiveBroker, thread: threading.Thread) -> None:
    asyncio.run_coroutine_threadsafe(live.server.stop(), live.loop).result(30)
    live.loop.call_soon_threadsafe(live.loop.stop)
    thread.join(30)
    live.loop.close()


def frame_bytes(command: RemotingCommand) -> bytes:
    return b"".join(bytes(part) for part in encode_command(command))


def roundtrip(addr: tuple[str, int], data: bytes, timeout: float = 5.0) -> list:
    """Send ``data`` in one write, half-close, read until the server closes; decoded events."""
    conn = RemotingConnection()
    events = []
    with socket.create_connection(addr, timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            events.extend(conn.receive_data(chunk))
    return events


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def remoting_config(small_config: BrokerConfig) -> BrokerConfig:
    # A real port, not 0: offset message ids embed the configured listen port.
    # Fast delay levels so retries and dead letters happen within a test's patience.
    return dataclasses.replace(small_config, listen_port=free_port(),
                               message_delay_level=" ".join(["1s"] * 18), mapped_file_size_commit_log=4 << 20,
                               namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(False, 0))


# plain_acl.yml for the ACL tests: "app" may publish and subscribe Open, only subscribe
# ReadOnly, nothing else; "ops" is an admin
ACL_FILE = """\
accounts:
  - accessKey: app
    secretKey: app-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Closed=DENY
      - Open=PUB|SUB
      - ReadOnly=SUB
  - accessKey: ops
    secretKey: ops-secret
    admin: true
"""


@pytest.fixture
def acl_config(remoting_config: BrokerConfig, tmp_path) -> BrokerConfig:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    return dataclasses.replace(remoting_config, acl_enable=True, plain_acl_file=str(path))


@pytest.fixture
def live_broker(remoting_config: BrokerConfig) -> Iterator[LiveBroker]:
    live, thread = start_live_broker(remoting_config)
    try:
        yield live
    finally:
        stop_live_broker(live, thread)
