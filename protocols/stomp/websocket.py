"""STOMP over WebSocket (RabbitMQ's Web-STOMP shape): the same session behind wsproto.

The WebSocket handshake and framing are wsproto's (sans-IO); this module only routes: the
upgrade must ask for path ``/ws`` (``/stomp`` too, as some clients default to it), the
subprotocol chosen is the best of ``v12.stomp``, ``v11.stomp``, ``v10.stomp`` (or none, when
the client offers none), message payloads feed the STOMP connection as bytes (a STOMP frame
may span messages or share one), and each frame we write is one message: text when it is
UTF-8, binary otherwise. Pings are answered; a close is returned and the connection ends.
"""

from __future__ import annotations

from typing import Final

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from .session import StompSession

PATHS: Final = ("/ws", "/stomp")
SUBPROTOCOLS: Final = ("v12.stomp", "v11.stomp", "v10.stomp")


def choose_subprotocol(offered: list[str]) -> str | None:
    return next((p for p in SUBPROTOCOLS if p in offered), None)


class WebSocketStompSession(StompSession):
    """A StompSession whose bytes travel in WebSocket messages."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ws = WSConnection(ConnectionType.SERVER)
        self._open = False

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            self.ws.receive_data(data)
            for event in self.ws.events():
                if self._closing:
                    return
                if isinstance(event, Request):
                    self._handshake(event)
                elif isinstance(event, (TextMessage, BytesMessage)):
                    payload = event.data
                    self._receive(payload.encode("utf-8") if isinstance(payload, str) else payload)
                elif isinstance(event, Ping):
                    self._raw(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    if self.ws.state.name == "REMOTE_CLOSING":
                        self._raw(self.ws.send(event.response()))
                    self._closing = True
                    if self.transport is not None:
                        self.transport.close()
                    return
        # not WebSocket: nothing to answer in (wsproto raises UnicodeError for a Host header that
        # is not IDNA, found by bench/fuzz.py)
        except (RemoteProtocolError, LocalProtocolError, UnicodeError):
            self._closing = True
            if self.transport is not None:
                self.transport.abort()
            return
        if not self._open:
            self._note_input(False, True)  # a handshake on its way: the frame timeout applies

    def _handshake(self, request: Request) -> None:
        path = request.target.split("?", 1)[0]
        if path not in PATHS:
            self._raw(self.ws.send(RejectConnection(status_code=404)))
            self._closing = True
            self.transport.close()  # type: ignore[union-attr]
            return
        self._raw(self.ws.send(AcceptConnection(subprotocol=choose_subprotocol(request.subprotocols))))
        self._open = True
        self._note_input(True, False)

    def _raw(self, data: bytes) -> None:
        if self.transport is not None and data:
            self.transport.write(data)

    def _write_out(self, frames: list[bytes]) -> None:  # type: ignore[override]
        if not self._open:
            return
        send = self.ws.send
        out = []
        for frame in frames:
            try:
                message: TextMessage | BytesMessage = TextMessage(data=frame.decode("utf-8"))
            except UnicodeDecodeError:
                message = BytesMessage(data=frame)
            out.append(send(message))
        self.transport.writelines(out)  # type: ignore[union-attr]

    def _close_after_output(self) -> None:
        self._closing = True
        self._backlog.clear()
        self._flush()
        if self._open and self.transport is not None:
            try:
                self._raw(self.ws.send(CloseConnection(code=1000)))
            except LocalProtocolError:
                pass  # the client closed first
        if self.transport is not None:
            self.transport.close()
