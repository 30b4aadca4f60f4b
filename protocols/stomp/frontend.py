"""The STOMP front-end: a TCP listener on ``stomp.port`` and a WebSocket one on
``stomp.wsPort`` (0 = none), serving one kind of session.

Both listeners share one `StompContext` (the Broker facade, the ACL when ``aclEnable`` is
on, the frame limits). ``stop`` closes both listeners and their connections, then awaits the
release of the subscriptions those connections held (their unacked messages go back to
their groups; `ListenerFrontEnd.spawn`), so nothing outlives it. The broker is started before and stopped after it.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketport.core.broker import Broker
from rocketport.core.config import bind_port

from ..frontend import ListenerFrontEnd
from ..listener import Listener
from ..session_base import Session
from ..tls import TlsContexts
from .codec import Limits
from .session import StompContext, StompSession
from .websocket import WebSocketStompSession

TCP_ROLE = "stomp"
WS_ROLE = "stomp (websocket)"


class StompFrontEnd(ListenerFrontEnd):
    name = "stomp"

    def __init__(self, broker: Broker) -> None:
        super().__init__()
        self.broker = broker
        config = broker.config
        section = config.stomp
        acl = broker.acl if config.acl_enable else None
        self.ctx = StompContext(broker, acl, Limits(max_body=config.message_size_of(section)), self.spawn,
                                traffic=self.traffic)
        limits = config.connection_limits
        self.listeners = [Listener(TCP_ROLE, section.host, section.port, self._tcp_session, limits)]
        # wsPort 0 means no WebSocket listener, except with port 0 (tests): both on free ports
        if section.ws_port or section.port == 0:
            self.listeners.append(Listener(WS_ROLE, section.host, section.ws_port, self._ws_session, limits))
        if section.tls_port or section.wss_port:
            tls = TlsContexts(config)
            if section.tls_port:  # STOMP over TLS (61614 by convention)
                self.listeners.append(Listener(TCP_ROLE + " (tls)", section.host, bind_port(section.tls_port),
                                               self._tcp_session, limits, tls=tls.tls_port()))
            if section.wss_port:  # Web-STOMP over TLS (wss)
                self.listeners.append(Listener(WS_ROLE + " (tls)", section.host, bind_port(section.wss_port),
                                               self._ws_session, limits, tls=tls.tls_port()))

    def _tcp_session(self, on_open: Callable[[Session], bool],
                     on_closed: Callable[[Session], None]) -> StompSession:
        return StompSession(self.ctx, on_open=on_open, on_closed=on_closed)

    def _ws_session(self, on_open: Callable[[Session], bool],
                    on_closed: Callable[[Session], None]) -> StompSession:
        return WebSocketStompSession(self.ctx, on_open=on_open, on_closed=on_closed)
