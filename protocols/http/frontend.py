"""The HTTP front-end: one listener (``http.host``:``http.port``) serving /metrics, the
JSON API and the web console. It reads the broker and the other front-ends when asked and changes nothing
they hold; it starts last and stops first, so a scrape never sees a half-started broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from prometheus_client import ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from rocketport.core.broker import Broker
from rocketport.core.config import bind_port

from ..frontend import FrontEnd, ListenerFrontEnd
from ..histogram import SIZE_BUCKETS, Histogram, Latencies
from ..listener import Listener
from ..session_base import Session
from ..tls import TlsContexts
from . import api, responses, text_format
from .access import HttpAccess
from .console import Console
from .loop_lag import LoopLag
from .metrics import BrokerCollector
from .responses import Response
from .session import HttpSession, Request

ROLE = "http"


class HttpFrontEnd(ListenerFrontEnd):
    name = "http"

    def __init__(self, broker: Broker, front_ends: Sequence[FrontEnd] = ()) -> None:
        super().__init__()
        self.broker = broker
        self.front_ends = front_ends  # the server's list, complete once the broker starts
        section = broker.config.http
        self.loop_lag = LoopLag()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, front_ends, self.loop_lag))
        ProcessCollector(registry=self.registry)  # CPU, RSS, open files of this process
        self.api = api.Api(broker, front_ends)
        self.console = Console()
        self.access = HttpAccess(broker)
        self.listener = Listener(ROLE, section.host, section.port, self._new_session,
                                 broker.config.connection_limits)
        self.listeners = [self.listener]
        if section.tls_port:  # HTTPS
            self.listeners.append(Listener(ROLE + " (tls)", section.host, bind_port(section.tls_port),
                                           self._new_session,
                                           broker.config.connection_limits,
                                           tls=TlsContexts(broker.config).tls_port()))

    def _new_session(self, on_open: Callable[[Session], bool],
                     on_closed: Callable[[Session], None]) -> HttpSession:
        return HttpSession(self.route, on_open=on_open, on_closed=on_closed)

    @property
    def port(self) -> int:
        return self.listener.port

    async def start(self) -> None:
        for front_end in self.front_ends:  # from now on they record the histograms /metrics exports
            traffic = getattr(front_end, "traffic", None)
            if traffic is not None and front_end is not self:
                traffic.sizes, traffic.latency = Histogram(SIZE_BUCKETS), Latencies()
        await super().start()
        self.loop_lag.start()

    async def stop(self) -> None:
        await self.loop_lag.stop()
        await super().stop()

    def route(self, request: Request) -> Response:
        path = urlsplit(request.target).path
        if path == "/metrics":
            if request.method not in ("GET", "HEAD"):
                return responses.method_not_allowed("GET, HEAD")
            # the text format Prometheus asks for (Accept), else version 0.0.4, which every
            # Prometheus reads
            encode, content_type = choose_encoder(_header(request, "accept"))
            if content_type.startswith("text/plain"):  # the text format: the fast writer
                return Response(200, text_format.CONTENT_TYPE, text_format.render(self.registry))
            return Response(200, content_type, encode(self.registry))
        if path == "/api" or path.startswith("/api/"):
            return (self.access.refusal(request)
                    or (self.access.write_refusal(request) if request.method == "POST" else None)
                    or self.api.route(request))
        page = self.console.get(path)
        if page is not None:
            refusal = self.access.refusal(request)
            if refusal is not None:
                return refusal
            if request.method not in ("GET", "HEAD"):
                return responses.method_not_allowed("GET, HEAD")
            return page
        return responses.not_found(path)


def _header(request: Request, name: str) -> str:
    return next((value for key, value in request.headers if key == name), "")
