"""A TCP listener that owns its sessions: bind, accept, limits, timeouts, graceful stop.

Binding is separate from serving so the shell can bind every front-end's port before the
store opens: a taken port then fails start-up while the store is still untouched. A bound
socket listens at once (connections queue in its backlog until it accepts): a port bound
but not listening can be bound again by another process (both with SO_REUSEADDR) and taken
from under it, and `start` checks that the socket still listens before it says so. A
listener holds at most ``max_connections`` sessions (later ones are closed on accept), and
a once-a-second sweep closes sessions idle for ``idle_timeout`` seconds (no input and no
request in flight) and sessions whose frame has been arriving for ``frame_timeout``
seconds without completing (slowloris). Nothing here knows a protocol.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
from collections.abc import Callable

from rocketport.core.config import ConnectionLimits

from .session_base import Session
from .tls import TlsGate, TlsPolicy, gated

log = logging.getLogger(__name__)

# Tests only (docs/configuration.md): a port whose listener stops its process (SIGSTOP)
# between bind and listen, so a test can race another broker into that gap.
STOP_AFTER_BIND_ENV = "ROCKETPORT_STOP_AFTER_BIND"
BACKLOG = 100  # asyncio's create_server default
CLOSE_GRACE_S = 2.0  # at stop: how long a closing session may take before it is aborted


class ListenError(OSError):
    """A listener could not bind: one line naming the role, the address and why."""

    def __init__(self, role: str, host: str, port: int, exc: OSError) -> None:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason = "address already in use"
        super().__init__(exc.errno, f"cannot listen on {host}:{port} ({role}): {reason}")
        self.role = role

    def __str__(self) -> str:
        return self.strerror


class Listener:
    """Accepts connections for one role ("kafka", "broker (remoting)", ...)."""

    def __init__(self, role: str, host: str, port: int,
                 session_factory: Callable[[Callable[[Session], bool], Callable[[Session], None]], Session],
                 limits: ConnectionLimits | None = None, tls: TlsPolicy | None = None) -> None:
        self.role = role
        self.tls = tls  # None: plaintext only (protocols/tls.py)
        self.gates: set[TlsGate] = set()  # connections before their TLS handshake ends
        self.host = host
        self.port = port
        self.limits = limits or ConnectionLimits()
        self.sessions: set[Session] = set()
        self.refused = 0
        self._factory = session_factory
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task | None = None

    def _accept(self, session: Session) -> bool:
        if len(self.sessions) >= self.limits.max_connections:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning("%s: %d connections open, refusing %s:%d (refused %d so far)",
                            self.role, len(self.sessions), *session.peer, self.refused)
            return False
        self.sessions.add(session)
        return True

    def _new_session(self) -> Session:
        return self._factory(self._accept, self.sessions.discard)

    async def bind(self) -> None:
        """Bind and listen without accepting yet; ListenError when the port is taken."""
        if self._server is not None:
            return
        try:
            self._server = await asyncio.get_running_loop().create_server(
                gated(self._new_session, self.tls, self.role, self.gates), self.host, self.port,
                reuse_address=True, start_serving=False,
                backlog=BACKLOG)
            if os.environ.get(STOP_AFTER_BIND_ENV) == str(self.port):
                os.kill(os.getpid(), signal.SIGSTOP)
            for sock in self._server.sockets:  # the loop listens only when it serves
                with socket.socket(fileno=os.dup(sock.fileno())) as same:
                    same.listen(BACKLOG)
        except OSError as exc:
            self._close_unserved()
            raise ListenError(self.role, self.host, self.port, exc) from None
        if self.port == 0:  # tests ask for any free port
            self.port = self._server.sockets[0].getsockname()[1]

    def _close_unserved(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def start(self) -> None:
        """Accept connections (binding first if `bind` was not called); ListenError when a
        socket does not listen (uvloop's start_serving says nothing when it cannot)."""
        await self.bind()
        assert self._server is not None
        await self._server.start_serving()
        for sock in self._server.sockets:
            if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                raise ListenError(self.role, self.host, self.port,
                                  OSError(errno.EADDRINUSE, "not listening"))
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep(), name=f"sweep-{self.role}")
        log.info("%s listening on %s:%d%s", self.role, self.host, self.port,
                 "" if self.tls is None else " (TLS and plaintext)" if self.tls.plaintext_ok else " (TLS)")

    async def stop(self) -> None:
        """Stop accepting, close every session and wait for their requests to end."""
        if self._server is None:
            return
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        self._server.close()
        for gate in list(self.gates):
            gate.abort()
        sessions = list(self.sessions)
        for session in sessions:
            session.close()
        closing = asyncio.gather(*(s.wait_closed() for s in sessions), return_exceptions=True)
        try:  # a TLS session's close waits for the peer's close_notify: not at stop
            await asyncio.wait_for(asyncio.shield(closing), CLOSE_GRACE_S)
        except asyncio.TimeoutError:
            for session in sessions:
                session.abort()
            await closing
        await self._server.wait_closed()
        self._server = None

    async def _sweep(self) -> None:
        limits = self.limits
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, limits.frame_timeout / 2, limits.idle_timeout / 2))
            now = loop.time()
            if self.tls is not None and self.tls.watch is not None:
                self.tls.watch()  # certificate files changed: new handshakes use the new ones
            for session in list(self.sessions):
                partial = session.partial_since
                if partial is not None and now - partial > limits.frame_timeout:
                    log.info("%s: closing %s:%d: a frame incomplete for %.0f s", self.role,
                             *session.peer, now - partial)
                    session.abort()
                elif now - session.last_input > limits.idle_timeout and not session.in_flight:
                    log.info("%s: closing %s:%d: idle for %.0f s", self.role, *session.peer,
                             now - session.last_input)
                    session.close()
