"""Connection plumbing every front-end shares (protocols/listener.py): many connections at
once with a normal client still served, idle and half-sent (slowloris) connections closed
after their timeouts, and the connection limit. Against a live broker, every front-end."""

from __future__ import annotations

import dataclasses
import resource
import socket
import struct
import time

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.protocols.remoting import RemotingCommand, RemotingConnection, encode_command
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from tests.support.live_broker import LiveBroker, start_live_broker

ROLES = ("broker (remoting)", "name server", "kafka")


def _config(small_config: BrokerConfig, **changes) -> BrokerConfig:
    return dataclasses.replace(small_config, listen_port=0, namesrv=ProtocolConfig(True, 0),
                               kafka=ProtocolConfig(True, 0), **changes)


@pytest.fixture
def broker(small_config, request) -> LiveBroker:
    live = start_live_broker(_config(small_config, **getattr(request, "param", {})))
    try:
        yield live
    finally:
        live.stop()


def _kafka_api_versions() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _remoting_request(code: int) -> bytes:
    return b"".join(bytes(p) for p in encode_command(RemotingCommand(code=code, opaque=7)))


def _answered(addr: tuple[str, int], role: str, timeout: float = 5.0) -> bool:
    """A fresh connection sends one well-formed request and gets its answer."""
    with socket.create_connection(addr, timeout=timeout) as sock:
        if role == "kafka":
            sock.sendall(_kafka_api_versions())
            head = _recv_exactly(sock, 8)
            size, correlation = struct.unpack(">ii", head)
            _recv_exactly(sock, size - 4)
            return correlation == 7
        code = RequestCode.GET_BROKER_RUNTIME_INFO if role.startswith("broker") \
            else RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER
        sock.sendall(_remoting_request(code))
        conn = RemotingConnection()
        while True:
            events = conn.receive_data(sock.recv(65536))
            if events:
                return events[0].command.opaque == 7 and events[0].command.code == ResponseCode.SUCCESS


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (TimeoutError, socket.timeout):
        return False
    except ConnectionResetError:
        return True


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("role", ROLES)
def test_a_thousand_idle_connections_and_a_normal_client_is_still_served(broker, role):
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft >= 2200, "the broker lifts the soft descriptor limit at start"
    addr = broker.endpoint(role)
    rss_before = _rss_mib()
    socks = []
    try:
        for i in range(1000):
            s = socket.create_connection(addr, timeout=10)
            if i % 2:
                s.sendall(b"\x00\x00")  # and half of them have sent part of a frame
            socks.append(s)
        deadline = time.monotonic() + 20
        listener = next(lst for lst in _listeners(broker) if lst.role == role)
        while broker.run(lambda: len(listener.sessions)) < 1000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert broker.run(lambda: len(listener.sessions)) >= 1000
        assert _answered(addr, role)
        # the broker shares this process: 1,000 sessions cost a bounded amount of memory
        assert _rss_mib() - rss_before < 200
    finally:
        for s in socks:
            s.close()


def _listeners(broker: LiveBroker):
    out = []
    for front_end in broker.server.front_ends.values():
        for attr in ("listener", "namesrv_listener"):
            lst = getattr(front_end, attr, None)
            if lst is not None:
                out.append(lst)
    return out


@pytest.mark.parametrize("broker", [{"server_channel_max_idle_time_seconds": 1,
                                     "server_frame_timeout_seconds": 1}], indirect=True)
@pytest.mark.parametrize("role", ROLES)
def test_idle_and_half_sent_connections_are_closed_after_their_timeouts(broker, role):
    addr = broker.endpoint(role)
    with socket.create_connection(addr) as idle, socket.create_connection(addr) as slow:
        # a slowloris: a frame of 100 bytes announced, then one byte of it at a time
        slow.sendall(struct.pack(">i", 100))
        started = time.monotonic()
        for _ in range(3):  # inputs keep coming (0.6 s, inside the 1 s frame timeout)
            time.sleep(0.2)
            slow.sendall(b"\x00")
        assert _closed_by_peer(slow, within=5), "a frame incomplete past the frame timeout"
        assert 1.0 <= time.monotonic() - started < 6
        assert _closed_by_peer(idle, within=5), "an idle connection past the idle timeout"
    # an active client is not idle: three requests a second apart on one connection
    with socket.create_connection(addr, timeout=5) as sock:
        conn = RemotingConnection()
        for _ in range(3):
            time.sleep(0.7)
            if role == "kafka":
                sock.sendall(_kafka_api_versions())
                size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
                _recv_exactly(sock, size)
            else:
                sock.sendall(_remoting_request(RequestCode.HEART_BEAT if role.startswith("broker")
                                               else RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
                while not conn.receive_data(sock.recv(65536)):
                    pass


@pytest.mark.parametrize("broker", [{"server_max_connections": 5}], indirect=True)
def test_connections_past_the_limit_are_closed_and_the_rest_served(broker):
    addr = broker.endpoint("kafka")
    socks = [socket.create_connection(addr, timeout=5) for _ in range(5)]
    try:
        extra = socket.create_connection(addr, timeout=5)
        assert _closed_by_peer(extra, within=5)
        extra.close()
        socks[0].sendall(_kafka_api_versions())
        assert struct.unpack(">i", _recv_exactly(socks[0], 4))[0] > 0
    finally:
        for s in socks:
            s.close()
    deadline = time.monotonic() + 5
    while not _answered_safely(addr) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _answered(addr, "kafka"), "once others left, new connections are served again"


def _answered_safely(addr) -> bool:
    try:
        return _answered(addr, "kafka", timeout=1)
    except (ConnectionError, OSError):
        return False
