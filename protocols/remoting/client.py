"""A minimal asyncio remoting client: one connection, requests matched to responses by opaque.

Used where the broker itself is a client: registering with external name servers
(namesrv.BrokerRegistrar). Front-ends import only the core, so the broker does not use
`rocketport.client` (built on this package's codec, for applications, `rocketport admin`
and the tests). Many requests may be
in flight at once (each awaits its own future); the reader task is owned by the client and
ends with it. Broker-initiated requests (pushes such as 39 and 40) go to `on_request`
when one is given, else are ignored. It is deliberately not a
producer/consumer API (that lives in `rocketport.client`); it must never retry or reconnect
on its own.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from .acl_sign import sign_request
from .codes import RequestCode
from .command import RemotingCommand
from .connection import RemotingConnection
from .events import CommandReceived
from .frame import encode_command


class RemotingClientError(Exception):
    """The connection failed or closed before an answer came."""


class RemotingClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 on_request: Callable[[RemotingCommand], None] | None = None,
                 credentials: tuple[str, str] | None = None) -> None:
        self.on_request = on_request
        self.credentials = credentials  # (access key, secret key): requests are signed
        self._reader = reader
        self._writer = writer
        self._conn = RemotingConnection()
        self._opaque = itertools.count(1)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._task = asyncio.create_task(self._read_loop(), name="remoting-client-reader")

    @classmethod
    async def connect(cls, addr: str, timeout_s: float = 5.0,
                      on_request: Callable[[RemotingCommand], None] | None = None,
                      credentials: tuple[str, str] | None = None) -> RemotingClient:
        """Connect to ``host:port``; with ``credentials`` every request is ACL-signed."""
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout_s)
        return cls(reader, writer, on_request, credentials)

    async def _read_loop(self) -> None:
        error: BaseException = RemotingClientError("connection closed")
        try:
            while data := await self._reader.read(1 << 16):
                for event in self._conn.receive_data(data):
                    if type(event) is not CommandReceived:
                        if event.fatal:
                            raise RemotingClientError(f"bad frame from server: {event.reason}")
                        continue
                    command = event.command
                    if not command.is_response:
                        if self.on_request is not None:
                            self.on_request(command)
                        continue
                    future = self._pending.pop(command.opaque, None)
                    if future is not None and not future.done():
                        future.set_result(command)
        except (OSError, RemotingClientError) as exc:
            error = exc if isinstance(exc, RemotingClientError) else RemotingClientError(str(exc))
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    def _send(self, request: RemotingCommand) -> None:
        if self._task.done():
            raise RemotingClientError("connection closed")
        if self.credentials is not None:
            sign_request(request, *self.credentials)
        self._writer.writelines(encode_command(request))

    async def invoke(self, request: RemotingCommand, timeout_s: float = 10.0) -> RemotingCommand:
        """Send ``request`` and wait for its response."""
        request.opaque = next(self._opaque)
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[request.opaque] = future
        try:
            self._send(request)
            await self._writer.drain()
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._pending.pop(request.opaque, None)

    @property
    def closed(self) -> bool:
        """The server closed the connection (or it was closed here)."""
        return self._task.done()

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the connection has closed, whichever side closed it."""
        self._task.add_done_callback(lambda _task: callback())

    async def close(self) -> None:
        self._writer.close()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def request(code: RequestCode | int, ext_fields: dict[str, str] | None = None,
            body: bytes = b"") -> RemotingCommand:
    """A request command as Rocketport's own tools send it."""
    return RemotingCommand(code=int(code), ext_fields=ext_fields or {}, body=body)
