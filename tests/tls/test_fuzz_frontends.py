"""Hostile bytes against the STOMP, Web-STOMP, AMQP, HTTP and TLS listeners (hypothesis):
random bytes and mutations of a well-formed opening, each sent on its own connection to a
live broker. After each front-end's run the broker still answers a well-formed client of
that protocol, every fuzzed connection is gone (no session or TLS gate left behind), no
exception was logged with a traceback, and the process's heap has not grown without bound.

Short by default (FUZZ_EXAMPLES inputs per front-end); ROCKETPORT_FUZZ_EXAMPLES=5000 runs
a longer campaign; bench/fuzz.py runs the 1,000,000-input ones.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator

import pika
import pytest
import stomp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.protocols import tls
from tests.support.hostile_inputs import seeds
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.tls.certs import Pki, make_pki
from tests.tls.conftest import tls_config
from tests.tls.test_tls_clients import client_context

FUZZ_EXAMPLES = int(os.environ.get("ROCKETPORT_FUZZ_EXAMPLES", "100"))
READ_S = 0.05  # how long one input waits for the broker's answer (not asserted)
RSS_BOUND_KIB = 64 << 10  # heap growth allowed over one front-end's run
SEEDS = seeds()
ROLES = {"stomp": "stomp", "ws": "stomp (websocket)", "amqp": "amqp", "http": "http", "tls": "stomp (tls)"}


@st.composite
def hostile(draw, seeds: list[bytes]) -> bytes:
    """Random bytes, or a seed with a few mutations: byte flips, inserts, deletes,
    repeated chunks, truncation, integers at the edges."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=2048))
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "repeat", "truncate", "edge"]))
        if op == "flip" and pos < len(data):
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=64))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 64))]
        elif op == "repeat":
            chunk = bytes(data[pos:pos + draw(st.integers(1, 64))])
            data[pos:pos] = chunk * draw(st.integers(1, 50))
        elif op == "truncate":
            del data[pos:]
        elif op == "edge":
            data[pos:pos + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00",
                                                      b"\x80\x00\x00\x00", b"9999", b"-1\r\n", b"\n\n\x00\x00"]))
    return bytes(data)


def _send(port: int, data: bytes) -> None:
    """One connection: write the input, half-close, read briefly (nothing asserted), close."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(READ_S)
            while sock.recv(65536):
                pass
        except OSError:  # refused, reset or timed out: all fine answers to garbage
            pass


def _rss_anon_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))


@pytest.fixture(scope="module")
def fuzz_pki(tmp_path_factory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory, fuzz_pki) -> Iterator[LiveBroker]:
    saved, tls.HANDSHAKE_TIMEOUT_S = tls.HANDSHAKE_TIMEOUT_S, 1.0  # a half ClientHello is dropped soon
    try:
        live = start_live_broker(tls_config(str(tmp_path_factory.mktemp("fuzz")), fuzz_pki))
    finally:
        tls.HANDSHAKE_TIMEOUT_S = saved
    try:
        yield live
    finally:
        live.stop()


# -- a well-formed client of each front-end, after the fuzzing ---------------------------------
def _stomp_ok(live: LiveBroker, pki: Pki, role: str) -> None:
    port = live.endpoint(role)[1]
    conn = stomp.Connection12([("127.0.0.1", port)], timeout=10, heartbeats=(0, 0))
    if role.endswith("(tls)"):
        conn.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=pki.ca)
    receipts: list[str] = []

    class Listener(stomp.ConnectionListener):
        def on_receipt(self, frame) -> None:
            receipts.append(frame.headers["receipt-id"])

    conn.set_listener("t", Listener())
    conn.connect(wait=True)
    conn.send("/queue/after-fuzz", "still here", receipt="r")
    deadline = time.monotonic() + 10
    while not receipts and time.monotonic() < deadline:
        time.sleep(0.02)
    conn.disconnect()
    assert "r" in receipts  # (the DISCONNECT receipt may follow)


def _ws_ok(live: LiveBroker, pki: Pki) -> None:
    from websockets.sync.client import connect as ws_connect
    port = live.endpoint("stomp (websocket)")[1]
    with ws_connect(f"ws://127.0.0.1:{port}/ws", subprotocols=["v12.stomp"]) as ws:
        ws.send("CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        assert str(ws.recv(10)).startswith("CONNECTED")


def _amqp_ok(live: LiveBroker, pki: Pki) -> None:
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1])) as conn:
        conn.channel().queue_declare("after-fuzz")


def _http_ok(live: LiveBroker, pki: Pki) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{live.endpoint('http')[1]}/metrics", timeout=10) as r:
        assert r.status == 200 and b"rocketmq" in r.read()


WELL_FORMED: dict[str, Callable[[LiveBroker, Pki], None]] = {
    "stomp": lambda live, pki: _stomp_ok(live, pki, "stomp"), "ws": _ws_ok, "amqp": _amqp_ok, "http": _http_ok,
    "tls": lambda live, pki: _stomp_ok(live, pki, "stomp (tls)"),
}


def _drained(live: LiveBroker, role: str) -> bool:
    """No session and no TLS gate left on the listener (the fuzzed connections all closed)."""
    def count() -> int:
        listeners = [listener for fe in live.server.front_ends.values() for listener in getattr(fe, "listeners", [])
                     if listener.role == role]
        return sum(len(listener.sessions) + len(listener.gates) for listener in listeners)
    deadline = time.monotonic() + 15
    while live.run(count) and time.monotonic() < deadline:
        time.sleep(0.1)
    return live.run(count) == 0


@pytest.mark.parametrize("target", sorted(SEEDS))
def test_hostile_bytes_leave_the_front_end_serving(fuzz_broker, fuzz_pki, target, caplog):
    port = fuzz_broker.endpoint(ROLES[target])[1]
    before = _rss_anon_kib()

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(hostile(SEEDS[target]))
    def fuzz(data: bytes) -> None:
        _send(port, data)

    fuzz()
    WELL_FORMED[target](fuzz_broker, fuzz_pki)
    assert _drained(fuzz_broker, ROLES[target])
    assert _rss_anon_kib() - before < RSS_BOUND_KIB
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]  # asyncio's "Fatal error on transport" too
    assert not tracebacks  # client bytes must not raise inside the broker
    if target == "tls":  # and the remoting port, permissive: TLS and plaintext on one port
        assert b'"opaque":1' in _remoting_heartbeat_tls(fuzz_broker, fuzz_pki)


def _remoting_heartbeat_tls(live: LiveBroker, pki: Pki) -> bytes:
    from tests.tls.test_tls_clients import _remoting_heartbeat
    host, port = live.endpoint("broker (remoting)")
    with socket.create_connection((host, port), timeout=10) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as sock:
        return _remoting_heartbeat(sock)


def test_a_websocket_upgrade_with_a_host_that_is_not_idna_is_closed_quietly(fuzz_broker, fuzz_pki, caplog):
    """bench/fuzz.py's finding: wsproto raised UnicodeDecodeError out of data_received."""
    upgrade = SEEDS["ws"][0].replace(b"Host: localhost", b"Host: a\x80b")
    port = fuzz_broker.endpoint("stomp (websocket)")[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(upgrade)
        sock.settimeout(5)
        assert sock.recv(65536) == b""  # closed, nothing answered
    _ws_ok(fuzz_broker, fuzz_pki)
    assert not [r for r in caplog.records if r.exc_info]
