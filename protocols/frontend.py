"""The seam every wire protocol plugs into: the front-end shape and the listener-made base.

A front-end is built from the Broker facade (it reads its own config section), binds its
ports in `bind` (before the store opens, so a taken port fails start-up with the store
untouched), serves from `start`, and in `stop` stops accepting, closes its connections and
drains what they were doing. The shell builds the enabled ones from `protocols.registry`
and never names a protocol. This module must never import a protocol package (they import it).
`ListenerFrontEnd` is the part every front-end made of listeners shares: a subclass fills
``listeners`` and wraps `bind` / `start` / `stop` with its own work.
"""

from __future__ import annotations

from typing import Protocol

from .listener import Listener
from .session_base import Session


class FrontEnd(Protocol):
    name: str

    def endpoints(self) -> list[tuple[str, str, int]]:
        """(role, host, port) of each listener, for the banner and tests."""

    async def bind(self) -> None:
        """Bind every port without accepting; raises ListenError (one line) on failure."""

    async def start(self) -> None:
        """Accept and serve (binds first if `bind` was not called)."""

    async def stop(self) -> None:
        """Stop accepting, close connections, drain; safe after a failed or partial start."""


class ListenerFrontEnd:
    """A front-end made of listeners, bound and started in order and stopped in reverse."""

    name: str
    listeners: list[Listener]

    @property
    def sessions(self) -> set[Session]:
        return set().union(*(listener.sessions for listener in self.listeners))

    def endpoints(self) -> list[tuple[str, str, int]]:
        return [(listener.role, listener.host, listener.port) for listener in self.listeners]

    async def bind(self) -> None:
        for listener in self.listeners:
            await listener.bind()

    async def start(self) -> None:
        await self.bind()
        for listener in self.listeners:
            await listener.start()

    async def stop(self) -> None:
        for listener in reversed(self.listeners):
            await listener.stop()
