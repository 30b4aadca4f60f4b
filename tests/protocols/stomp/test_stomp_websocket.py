"""STOMP over WebSocket (Web-STOMP's shape) with the `websockets` client: subprotocol
negotiation, frames in messages both ways, path check, and bad input closing only its own
connection."""

from __future__ import annotations

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from .stomp_support import connect, endpoint, stored


def url(live, path: str = "/ws") -> str:
    host, port = endpoint(live, websocket=True)
    return f"ws://{host}:{port}{path}"


def frames(ws, count: int) -> list[bytes]:
    out: list[bytes] = []
    while len(out) < count:
        message = ws.recv(timeout=10)
        data = message.encode() if isinstance(message, str) else message
        if data.strip(b"\r\n"):
            out.append(data)
    return out


@pytest.mark.parametrize("offered,chosen", [(["v12.stomp", "v11.stomp"], "v12.stomp"),
                                            (["v10.stomp"], "v10.stomp"), (None, None)])
def test_subprotocol_negotiation(stomp_broker, offered, chosen):
    with ws_connect(url(stomp_broker), subprotocols=offered) as ws:
        assert ws.subprotocol == chosen


def test_send_and_subscribe_over_websocket(stomp_broker):
    with ws_connect(url(stomp_broker), subprotocols=["v12.stomp"]) as ws:
        ws.send("CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        [connected] = frames(ws, 1)
        assert connected.startswith(b"CONNECTED\nversion:1.2\n")
        ws.send("SUBSCRIBE\ndestination:/queue/web\nid:0\nack:client-individual\n\n\0")
        # two frames in one message, the second one binary with a content-length body
        ws.send(b"SEND\ndestination:/queue/web\ncolor:green\nreceipt:r1\n\nhello web\0"
                b"SEND\ndestination:/queue/web\ncontent-length:3\n\n\0\xff\0\0")
        got = frames(ws, 3)
        receipt = got.index(b"RECEIPT\nreceipt-id:r1\n\n\0")
        [text] = [f for f in got if f.endswith(b"hello web\0")]
        [binary] = [f for f in got if f.endswith(b"\0\xff\0\0")]
        assert got.index(text) < receipt  # its own subscription's MESSAGE first, as on RabbitMQ
        assert b"color:green\n" in text and text.endswith(b"\n\nhello web\0")
        assert binary.endswith(b"content-length:3\n\n\0\xff\0\0")
        ack_id = text.split(b"\nack:")[1].split(b"\n")[0].decode()
        ws.send(f"ACK\nid:{ack_id}\nreceipt:a\n\n\0")
        assert frames(ws, 1) == [b"RECEIPT\nreceipt-id:a\n\n\0"]
        ws.send("DISCONNECT\nreceipt:bye\n\n\0")
        assert frames(ws, 1) == [b"RECEIPT\nreceipt-id:bye\n\n\0"]
    assert sorted(m.body for m in stored(stomp_broker, "web")) == [b"\0\xff\0", b"hello web"]


def test_a_frame_may_span_websocket_messages(stomp_broker):
    with ws_connect(url(stomp_broker), subprotocols=["v12.stomp"]) as ws:
        for part in ("CONN", "ECT\naccept-version:1.2\n", "\n\0"):
            ws.send(part)
        assert frames(ws, 1)[0].startswith(b"CONNECTED")


def test_unknown_path_is_refused(stomp_broker):
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(url(stomp_broker, "/nope"))
    assert refused.value.response.status_code == 404


def test_bad_frame_gets_error_and_close_and_others_go_on(stomp_broker):
    with ws_connect(url(stomp_broker), subprotocols=["v12.stomp"]) as ws:
        ws.send("CONNECT\naccept-version:1.2\n\n\0")
        frames(ws, 1)
        ws.send("NONSENSE\n\n\0")
        [error] = frames(ws, 1)
        assert error.startswith(b"ERROR\n") and b"unknown command" in error
        with pytest.raises(ConnectionClosed):
            frames(ws, 1)
    conn, listener = connect(stomp_broker)
    conn.send("/queue/still", b"fine", receipt="r")
    listener.wait_receipt("r")
    conn.disconnect()


def test_plain_stomp_on_the_websocket_port_is_dropped_and_the_broker_goes_on(stomp_broker):
    import socket
    received = b""
    with socket.create_connection(endpoint(stomp_broker, websocket=True), timeout=10) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\n\n\0")
        try:
            while chunk := sock.recv(4096):  # until the broker closes it (a timeout fails)
                received += chunk
        except ConnectionResetError:
            pass
    assert not received.startswith(b"CONNECTED"), "no STOMP without the WebSocket handshake"
    with ws_connect(url(stomp_broker), subprotocols=["v12.stomp"]) as ws:
        ws.send("CONNECT\naccept-version:1.2\n\n\0")
        assert frames(ws, 1)[0].startswith(b"CONNECTED")
