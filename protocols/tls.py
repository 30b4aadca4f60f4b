"""TLS for every listener, once: the server context from the tls.server.* keys, and the gate.

A listener with a `TlsPolicy` hands each accepted connection to a `TlsGate` before its
protocol's session sees it. The gate reads the first bytes (a TLS
ClientHello starts with 0x16, as RocketMQ's remoting detects it in permissive mode); TLS then
goes through ``loop.start_tls`` bounded by the handshake timeout (the bytes already read
fed to its TLS protocol), and the session gets the TLS transport. A plaintext client on a TLS-only port, a stalled or failed handshake (an
untrusted, expired or missing client certificate) is refused with one log line; nothing
reaches the session and nothing is raised into the loop. Every protocol speaks first from
the client, so waiting for the first byte never starves a server greeting.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from rocketport.core.config import BrokerConfig

from .session_base import Session

log = logging.getLogger(__name__)

TLS_HANDSHAKE = 0x16  # a TLS record of type handshake: the first byte of a ClientHello
HANDSHAKE_TIMEOUT_S = 10.0


def certificate_name(transport: asyncio.BaseTransport | None) -> str | None:
    """The subject common name of the client certificate a mutual-TLS handshake verified,
    None without one. The protocols' logins take it as the account's name (Kafka's SSL
    principal, AMQP's EXTERNAL, STOMP's ssl_cert_login)."""
    cert = transport.get_extra_info("peercert") if transport is not None else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class TlsConfigError(ValueError):
    """The tls.server.* keys cannot make a server context (one line: which file, why)."""


@dataclass(slots=True)
class TlsPolicy:
    """How one listener speaks TLS: the context, and whether plaintext may share the port."""

    context: ssl.SSLContext
    plaintext_ok: bool = False
    handshake_timeout: float = HANDSHAKE_TIMEOUT_S
    # re-reads the certificate files when they changed (the listener calls it once a second)
    watch: Callable[[], None] | None = None


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """The server context of tls.server.*: TLS 1.2 at least; a client CA and
    need.client.auth make it mutual."""
    if not config.tls_server_cert_path or not config.tls_server_key_path:
        raise TlsConfigError("TLS needs tls.server.certPath and tls.server.keyPath")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.tls_server_cert_path, config.tls_server_key_path)
        if config.tls_server_trust_cert_path:
            context.load_verify_locations(config.tls_server_trust_cert_path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"TLS certificate or key: {exc}") from None
    auth = config.tls_server_need_client_auth
    if auth != "none":
        if not config.tls_server_trust_cert_path:
            raise TlsConfigError(f"tls.server.need.client.auth={auth} needs tls.server.trustCertPath")
        context.verify_mode = ssl.CERT_REQUIRED if auth == "require" else ssl.CERT_OPTIONAL
    return context


class TlsContexts:
    """One server context per broker, built when a listener first asks (a broker without
    TLS never reads a certificate), re-read by `reload` for new connections."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._context: ssl.SSLContext | None = None
        self._stamp: tuple[float | None, ...] = ()

    def context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = server_context(self.config)
            self._stamp = self._files_stamp()
        return self._context

    def _files_stamp(self) -> tuple[float | None, ...]:
        out: list[float | None] = []
        for path in (self.config.tls_server_cert_path, self.config.tls_server_key_path,
                     self.config.tls_server_trust_cert_path):
            try:
                out.append(os.stat(path).st_mtime if path else None)
            except OSError:
                out.append(None)
        return tuple(out)

    def check(self) -> None:
        """Reload when a certificate, key or CA file changed (new connections get the new
        ones, open ones keep theirs); a broken file is logged and the old context kept."""
        if self._context is None:
            return
        stamp = self._files_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self.reload()
        except (TlsConfigError, OSError, ssl.SSLError) as exc:
            log.error("TLS: not reloaded, keeping the previous certificate: %s", exc)
            return
        log.info("TLS: reloaded %s", self.config.tls_server_cert_path)

    def same_port(self) -> TlsPolicy | None:
        """For a port that follows tls.server.mode (remoting, the name server)."""
        mode = self.config.tls_server_mode
        if mode == "disabled":
            return None
        return TlsPolicy(self.context(), mode == "permissive", HANDSHAKE_TIMEOUT_S, self.check)

    def tls_port(self) -> TlsPolicy:
        """For a protocol's own TLS port (kafka.tlsPort ...): TLS only."""
        return TlsPolicy(self.context(), False, HANDSHAKE_TIMEOUT_S, self.check)

    def reload(self) -> None:
        """Re-read the certificate and key into the live context: new connections use them,
        open ones keep theirs."""
        if self._context is not None:
            fresh = server_context(self.config)  # raises before touching the live context
            del fresh
            self._context.load_cert_chain(self.config.tls_server_cert_path, self.config.tls_server_key_path)
            if self.config.tls_server_trust_cert_path:
                self._context.load_verify_locations(self.config.tls_server_trust_cert_path)


class TlsGate(asyncio.Protocol):
    """Holds a new connection until its first bytes say TLS or plaintext (see the module)."""

    def __init__(self, session: Session, policy: TlsPolicy, role: str,
                 gates: set[TlsGate]) -> None:
        self.session = session
        self.policy = policy
        self.role = role
        self._gates = gates
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None
        self._first: bytes = b""
        self._loop = asyncio.get_running_loop()
        self.peer = ("?", 0)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        self._gates.add(self)
        self._timer = self._loop.call_later(self.policy.handshake_timeout, self._timed_out)

    def data_received(self, data: bytes) -> None:
        if self._first or self._task is not None:
            return  # reading is paused: nothing more comes before the decision
        assert self._transport is not None
        self._first = data
        self._transport.pause_reading()
        if data[0] == TLS_HANDSHAKE:
            self._task = self._loop.create_task(self._handshake(), name=f"tls-{self.role}")
        elif self.policy.plaintext_ok:
            self._cancel_timer()
            self._gates.discard(self)
            self._transport.set_protocol(self.session)
            self.session.connection_made(self._transport)
            self._transport.resume_reading()
            if not self._transport.is_closing():
                self.session.data_received(data)
        else:
            self._refuse("a plaintext client on a TLS port")

    def eof_received(self) -> bool | None:
        self._close()
        return None

    def _timed_out(self) -> None:
        self._timer = None
        self._refuse(f"no TLS handshake within {self.policy.handshake_timeout:g} s")

    async def _handshake(self) -> None:
        """start_tls with the ClientHello already read fed to its TLS protocol: it installs
        the protocol and schedules its connection_made in its first step, the feed goes after."""
        transport = self._transport
        assert transport is not None
        handoff = _Handoff()
        started = asyncio.ensure_future(self._loop.start_tls(
            transport, handoff, self.policy.context, server_side=True,
            ssl_handshake_timeout=self.policy.handshake_timeout,
            # a peer that never answers close_notify holds a closing session no longer than this
            ssl_shutdown_timeout=self.policy.handshake_timeout))
        await asyncio.sleep(0)
        self._loop.call_soon(self._feed, transport)
        try:
            tls = await started
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError) as exc:
            self._task = None
            self._refuse(f"TLS handshake failed: {exc}")
            return
        self._cancel_timer()
        self._gates.discard(self)
        if tls is None or tls.is_closing():
            return
        handoff.hand_over(tls, self.session)

    def _feed(self, transport: asyncio.Transport) -> None:
        protocol = transport.get_protocol()
        data, self._first = self._first, b""
        if hasattr(protocol, "get_buffer"):  # asyncio's and uvloop's TLS protocols read into buffers
            view = memoryview(data)
            while view:
                buf = protocol.get_buffer(len(view))
                n = min(len(buf), len(view))
                buf[:n] = view[:n]
                protocol.buffer_updated(n)
                view = view[n:]
        else:
            protocol.data_received(data)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _refuse(self, why: str) -> None:
        log.warning("%s: refused %s:%d: %s", self.role, *self.peer, why)
        self._close()

    def _close(self) -> None:
        self._cancel_timer()
        self._gates.discard(self)
        if self._task is not None and not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()
        if self._transport is not None:
            self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._gates.discard(self)

    def abort(self) -> None:
        """Close a connection still at the gate (the listener stops)."""
        self._close()


class _Handoff(asyncio.Protocol):
    """The TLS transport's first protocol: keeps what arrives between the handshake's end
    and the session's connection_made (a client writes at once), then steps aside."""

    def __init__(self) -> None:
        self._early: list[bytes] = []
        self._eof = False
        self._lost: tuple[Exception | None] | None = None

    def data_received(self, data: bytes) -> None:
        self._early.append(data)

    def eof_received(self) -> bool | None:
        self._eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = (exc,)

    def hand_over(self, transport: asyncio.BaseTransport, session: Session) -> None:
        transport.set_protocol(session)
        session.connection_made(transport)
        for data in self._early:
            if transport.is_closing():
                break
            session.data_received(data)
        if self._lost is not None:
            session.connection_lost(self._lost[0])
        elif self._eof:
            session.eof_received()


def gated(factory: Callable[[], Session], policy: TlsPolicy | None, role: str,
          gates: set[TlsGate]) -> Callable[[], asyncio.Protocol]:
    """The listener's protocol factory: sessions as they are, or behind a TLS gate."""
    if policy is None:
        return factory
    return lambda: TlsGate(factory(), policy, role, gates)
