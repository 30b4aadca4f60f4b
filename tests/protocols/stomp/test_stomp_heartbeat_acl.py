"""Heart-beats both ways (negotiated, sent, a silent client dropped) and the ACL on CONNECT,
SEND and SUBSCRIBE (the accounts file the remoting ACL and Kafka SASL use)."""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest

from tests.support.live_broker import start_live_broker
from tests.support.remoting import ACL_FILE

from .stomp_support import RawClient, connect, endpoint, stored


def connected(raw: RawClient, *headers: bytes) -> bytes:
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n" + b"".join(h + b"\n" for h in headers) + b"\n\0")
    frame = raw.frame()
    assert frame.startswith(b"CONNECTED\n"), frame
    return frame


def test_server_beats_at_the_negotiated_interval(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    assert b"heart-beat:200,0\n" in connected(raw, b"heart-beat:0,200")
    raw.sock.settimeout(0.1)
    received = b""
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        try:
            received += raw.sock.recv(100)
        except socket.timeout:
            pass
    assert set(received) == {0x0A} and 4 <= len(received) <= 20, received


def test_a_client_that_stops_beating_is_dropped(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    assert b"heart-beat:0,200\n" in connected(raw, b"heart-beat:200,0")
    for _ in range(6):  # beating keeps it open
        time.sleep(0.15)
        raw.send(b"\n")
    raw.sock.settimeout(0.05)
    with pytest.raises(socket.timeout):
        raw.sock.recv(10)
    raw.sock.settimeout(5)
    started = time.monotonic()
    assert raw.closed()
    assert time.monotonic() - started < 4.0  # 0.2 s promised, 2 s of slack


def test_heart_beats_below_the_floor_are_raised_to_it(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    assert b"heart-beat:100,0\n" in connected(raw, b"heart-beat:0,1")


def test_stomp_py_with_heart_beats_stays_connected(stomp_broker):
    conn, listener = connect(stomp_broker, heartbeats=(100, 100))
    time.sleep(1.0)
    conn.send("/queue/hb", b"alive", receipt="r")
    listener.wait_receipt("r")
    assert conn.is_connected() and not listener.errors
    conn.disconnect()


@pytest.fixture
def acl_broker(stomp_config, tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    live = start_live_broker(dataclasses.replace(stomp_config, acl_enable=True, plain_acl_file=str(path)))
    try:
        yield live
    finally:
        live.stop()


@pytest.mark.parametrize("login,passcode", [("app", "wrong"), ("nobody", "x"), (None, None)])
def test_refused_connect_gets_an_error_frame_and_nothing_else(acl_broker, login, passcode):
    raw = RawClient(endpoint(acl_broker))
    creds = b"" if login is None else b"login:%s\npasscode:%s\n" % (login.encode(), passcode.encode())
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n" + creds + b"\n\0SEND\ndestination:/queue/Open\n\nx\0")
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"Authentication failed" in error
    assert raw.closed() and raw.buffer == b""
    assert stored(acl_broker, "Open") == []


def test_accepted_login_sends_and_subscribes_within_its_permissions(acl_broker):
    conn, listener = connect(acl_broker, username="app", passcode="app-secret")
    conn.subscribe("/queue/Open", id="s", ack="auto")
    conn.send("/queue/Open", b"allowed", receipt="ok")
    listener.wait_receipt("ok")
    [(_, body)] = listener.wait_messages(1)
    assert body == b"allowed"
    conn.send("/queue/ReadOnly", b"refused", receipt="no")
    assert listener.wait(lambda: listener.errors)
    headers, _ = listener.errors[0]
    assert headers["receipt-id"] == "no" and "No permission to send to topic ReadOnly" in headers["message"]
    assert stored(acl_broker, "ReadOnly") == []


def test_subscribe_needs_sub_on_the_topic(acl_broker):
    conn, listener = connect(acl_broker, username="app", passcode="app-secret")
    conn.subscribe("/topic/Closed", id="s", ack="auto", receipt="sub")
    assert listener.wait(lambda: listener.errors)
    headers, _ = listener.errors[0]
    assert headers["receipt-id"] == "sub" and "topic Closed" in headers["message"]


def test_admin_account_may_do_anything(acl_broker):
    conn, listener = connect(acl_broker, username="ops", passcode="ops-secret")
    conn.send("/queue/Closed", b"admin", receipt="ok")
    listener.wait_receipt("ok")
    conn.disconnect()
    assert [m.body for m in stored(acl_broker, "Closed")] == [b"admin"]
