"""One HTTP/1.1 connection: bytes to h11 events, a request to its route, the answer back.

Requests on one connection are answered one at a time, in order (reading pauses while a
route runs). A request's head is bounded by h11 (MAX_HEAD), its body by MAX_BODY (413
beyond); the listener's frame timeout closes a request that keeps arriving without ending
and its idle timeout a quiet connection. Bytes that are not HTTP get a 400 (or the status
h11 names, 431 for a head too large) and the connection closes; a route that fails gets a
500 and is logged: a client's bytes never reach the broker beyond this connection. This is
the only module of the package that touches a transport.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from http import HTTPStatus
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Union

import h11

from ..session_base import Session
from . import responses
from .responses import Response

log = logging.getLogger(__name__)

MAX_HEAD: Final = 16 << 10  # request line and headers
MAX_BODY: Final = 64 << 10  # the JSON API's requests are small
_SERVER: Final = b"rocketport"


@dataclass(slots=True, frozen=True)
class Request:
    method: str
    target: str  # path and query, as sent
    headers: tuple[tuple[str, str], ...]
    body: bytes
    peer: tuple[str, int]


Route = Callable[[Request], Union[Response, Awaitable[Response]]]


class HttpSession(Session):
    def __init__(self, route: Route, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(on_open, on_closed)
        self._route = route
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._serving: asyncio.Task[Response] | None = None

    # ------------------------------------------------------------------ asyncio callbacks
    def data_received(self, data: bytes) -> None:
        if self._h11.their_state is h11.ERROR or self._h11.our_state is h11.MUST_CLOSE:
            return
        self._h11.receive_data(data)
        served = self._pump()
        head, _ = self._h11.trailing_data
        self._note_input(served, bool(head) or self._h11.their_state is h11.SEND_BODY)

    def eof_received(self) -> bool | None:
        self._h11.receive_data(b"")
        self._pump()
        return None

    def _busy(self) -> bool:
        return self._serving is not None

    def _closed_hook(self) -> None:
        if self._serving is not None:
            self._serving.cancel()

    @property
    def in_flight(self) -> int:
        return 1 if self._serving is not None else 0

    # ------------------------------------------------------------------ requests
    def _pump(self) -> bool:
        """Handle what is buffered until a request is being served or more bytes are
        needed; True when a request ended."""
        ended = False
        while self._serving is None and self.transport is not None:
            if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
                self._h11.start_next_cycle()
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(exc.error_status_hint, f"bad request: {exc}")
                return ended
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Request):
                self._request, self._body = event, bytearray()
                length = _content_length(event)
                if length is not None and length > MAX_BODY:
                    self._refuse(413, f"request body over {MAX_BODY} bytes")
                    return ended
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > MAX_BODY:
                    self._refuse(413, f"request body over {MAX_BODY} bytes")
                    return ended
            elif isinstance(event, h11.EndOfMessage):
                ended = True
                self._serve()
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                break
        return ended

    def _serve(self) -> None:
        event = self._request
        assert event is not None
        request = Request(event.method.decode("ascii", "replace"), event.target.decode("ascii", "replace"),
                          tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers),
                          bytes(self._body), self.peer)
        self._body = bytearray()
        try:
            answer = self._route(request)
        except Exception:
            log.exception("http: %s %s from %s:%d failed", request.method, request.target, *self.peer)
            answer = responses.text(500, "internal error (logged by the broker)")
        if inspect.isawaitable(answer):
            self._serving = self._loop.create_task(_awaited(answer), name="http-request")
            self._serving.add_done_callback(self._served)
            self._update_reading()
        else:
            self._respond(answer)

    def _served(self, task: asyncio.Task[Response]) -> None:
        self._serving = None
        if task.cancelled() or self.transport is None:
            return
        exc = task.exception()
        if exc is not None:
            log.error("http: request from %s:%d failed", *self.peer, exc_info=exc)
            answer = responses.text(500, "internal error (logged by the broker)")
        else:
            answer = task.result()
        self._respond(answer)
        self._update_reading()
        self._pump()

    # ------------------------------------------------------------------ answers
    def _respond(self, answer: Response, *, close: bool = False) -> None:
        head_only = self._request is not None and self._request.method == b"HEAD"
        headers = [(b"server", _SERVER), (b"content-type", answer.content_type.encode()),
                   (b"content-length", str(len(answer.body)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in answer.headers]
        if close:
            headers.append((b"connection", b"close"))
        out = [self._h11.send(h11.Response(status_code=answer.status, headers=headers,
                                           reason=_reason(answer.status)))]
        if answer.body and not head_only:
            out.append(self._h11.send(h11.Data(data=answer.body)))
        out.append(self._h11.send(h11.EndOfMessage()))
        self._emit_all([part for part in out if part])
        if self._h11.our_state is h11.MUST_CLOSE:
            self.close()

    def _refuse(self, status: int, why: str) -> None:
        """An error answer to bytes h11 or the bounds refused, then close."""
        log.info("http: %s:%d: %s", *self.peer, why)
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                self._respond(responses.text(status, why), close=True)
            except h11.LocalProtocolError:
                pass
        self.close()


async def _awaited(answer: Awaitable[Response]) -> Response:
    return await answer


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _content_length(event: h11.Request) -> int | None:
    for name, value in event.headers:
        if name == b"content-length":
            return int(value)  # h11 has checked it is a number
    return None
