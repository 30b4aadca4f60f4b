"""STOMP over WebSocket against RabbitMQ's Web-STOMP plugin (rabbitmq_web_stomp, path /ws),
with the `websockets` client: subprotocol negotiation, CONNECTED, a SEND with a receipt to
a queue the connection subscribes to (the frames, headers, body, the WebSocket message
type), ACK's receipt and an unknown path are the same on both; DISCONNECT's
receipt and an unknown command differ on purpose (each test says how)."""

from __future__ import annotations

from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from .harness import Peer

WAIT_S = 10.0


def _frames(ws, count: int) -> list[tuple[str, dict[str, str], bytes, str]]:
    """``count`` frames as (command, headers, body, the WebSocket message's type)."""
    out: list[tuple[str, dict[str, str], bytes, str]] = []
    while len(out) < count:
        message = ws.recv(timeout=WAIT_S)
        kind = "text" if isinstance(message, str) else "binary"
        data = message.encode() if isinstance(message, str) else message
        for raw in data.split(b"\0"):
            raw = raw.lstrip(b"\r\n")
            if raw:
                head, _, body = raw.partition(b"\n\n")
                command, *lines = head.decode().split("\n")
                out.append((command, dict(line.split(":", 1) for line in lines), body, kind))
    return out


def negotiation(peer: Peer) -> list[Any]:
    seen = []
    for offered in (["v12.stomp", "v11.stomp"], ["v11.stomp", "v10.stomp"], ["v10.stomp"]):
        with ws_connect(peer.ws_url, subprotocols=offered, open_timeout=WAIT_S) as ws:
            seen.append(ws.subprotocol)
    return seen


def send_subscribe_ack(peer: Peer) -> list[Any]:
    queue = f"/queue/{peer.name('web')}"
    seen: list[Any] = []
    with ws_connect(peer.ws_url, subprotocols=["v12.stomp"], open_timeout=WAIT_S) as ws:
        ws.send("CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\0")
        [(command, headers, _, kind)] = _frames(ws, 1)
        seen.append((command, headers["version"], kind))
        ws.send(f"SUBSCRIBE\ndestination:{queue}\nid:0\nack:client-individual\n\n\0")
        ws.send(f"SEND\ndestination:{queue}\ncolor:green\nreceipt:r1\n\nhello web\0")
        got = _frames(ws, 2)
        # RabbitMQ writes the SEND's RECEIPT (from the channel) and the MESSAGE (from the
        # queue's process) in either order from run to run: the pair is compared, not its order
        seen.append(sorted(command for command, *_ in got))
        (_, message, body, kind), = [f for f in got if f[0] == "MESSAGE"]
        seen.append((message["destination"], message["subscription"], message["color"], body, kind))
        ws.send(f"ACK\nid:{message['ack']}\nreceipt:a\n\n\0")
        seen.append(_frames(ws, 1)[0][:2])
    return seen


def disconnect_with_receipt(peer: Peer) -> list[Any]:
    with ws_connect(peer.ws_url, subprotocols=["v12.stomp"], open_timeout=WAIT_S) as ws:
        ws.send("CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\0")
        _frames(ws, 1)
        ws.send("DISCONNECT\nreceipt:bye\n\n\0")
        return [_next(ws)]


def _next(ws) -> Any:
    """The next frame's command and headers, or "closed" when the WebSocket closes first."""
    try:
        return _frames(ws, 1)[0][:2]
    except ConnectionClosed:
        return "closed"


def unknown_path(peer: Peer) -> list[Any]:
    try:
        ws_connect(peer.ws_url.replace("/ws", "/nope"), open_timeout=WAIT_S).close()
    except InvalidStatus as refused:
        return [refused.response.status_code]
    return ["accepted"]


def bad_frame(peer: Peer) -> list[Any]:
    with ws_connect(peer.ws_url, subprotocols=["v12.stomp"], open_timeout=WAIT_S) as ws:
        ws.send("CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\0")
        _frames(ws, 1)
        ws.send("NONSENSE\n\n\0")
        [(command, _, _, _)] = _frames(ws, 1)
        try:
            ws.send(f"SEND\ndestination:/queue/{peer.name('after')}\nreceipt:after\n\nx\0")
        except ConnectionClosed:
            return [command, "closed"]
        return [command, _next(ws)]


def test_subprotocol_negotiation(parity):
    parity.assert_same(negotiation)


def test_send_subscribe_ack_and_receipts(parity):
    parity.assert_same(send_subscribe_ack)


def test_an_unknown_path_is_refused(parity):
    parity.assert_same(unknown_path)


def test_disconnect_with_a_receipt_differs_on_purpose(parity):
    """RabbitMQ 3.10's Web-STOMP closes the WebSocket on DISCONNECT without the RECEIPT it
    sends over TCP; Rocketport sends it on both (docs/protocol-stomp.md, What differs)."""
    rabbit, rocket = parity.observe(disconnect_with_receipt)
    assert rabbit == ["closed"] and rocket == [("RECEIPT", {"receipt-id": "bye"})]


def test_an_unknown_command_differs_on_purpose(parity):
    """Both answer an unknown command with an ERROR; RabbitMQ keeps the connection (the next
    SEND gets its RECEIPT), Rocketport closes it after the ERROR as the STOMP specification
    says a server must (docs/protocol-stomp.md, What differs)."""
    rabbit, rocket = parity.observe(bad_frame)
    assert rabbit == ["ERROR", ("RECEIPT", {"receipt-id": "after"})] and rocket == ["ERROR", "closed"]
