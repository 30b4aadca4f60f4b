"""The proof of a master's death (core/ha/liveness.py) against real sockets on loopback: a
port nothing listens on is refused; a listener that never accepts (its process frozen) still
completes the connect; only "every address refused" is proof."""

from __future__ import annotations

import asyncio
import socket

from rocketport.core.ha.liveness import Probe, all_refused, probe


def closed_port() -> socket.socket:
    """A socket bound to a port but not listening: connects to it are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def frozen_listener() -> socket.socket:
    """A listening socket whose owner never accepts, as a SIGSTOPped broker's."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def addr(sock: socket.socket) -> str:
    host, port = sock.getsockname()
    return f"{host}:{port}"


def test_only_every_port_refused_is_proof_of_death():
    gone, other_gone, frozen = closed_port(), closed_port(), frozen_listener()
    try:
        async def check():
            assert await probe(addr(gone)) is Probe.REFUSED
            assert await probe(addr(frozen)) is Probe.OPEN
            assert await probe("127.0.0.1:not-a-port") is Probe.UNKNOWN
            assert await all_refused([addr(gone), addr(other_gone)])
            assert not await all_refused([addr(gone), addr(frozen)])  # one port still listens
            assert not await all_refused([])
        asyncio.run(check())
    finally:
        for sock in (gone, other_gone, frozen):
            sock.close()
