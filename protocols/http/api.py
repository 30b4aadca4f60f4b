"""The JSON API under /api/ (filled in below; see docs/observability.md)."""

from __future__ import annotations

from collections.abc import Sequence

from rocketport.core.broker import Broker

from ..frontend import FrontEnd
from . import responses
from .responses import Response
from .session import Request


class Api:
    def __init__(self, broker: Broker, front_ends: Sequence[FrontEnd]) -> None:
        self.broker = broker
        self.front_ends = front_ends

    def route(self, request: Request) -> Response:
        return responses.not_found(request.target)
