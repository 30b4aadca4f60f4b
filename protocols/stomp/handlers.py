"""One STOMP connection's frame handlers: a table from command to the direction serving it.

The handlers are split by direction as Artemis splits its sessions' contexts: `publish`
(SEND, the plain-send lane), `deliver` (SUBSCRIBE, UNSUBSCRIBE, MESSAGE, ACK, NACK), and
`transactions` (BEGIN, COMMIT, ABORT), which spans both. A SEND, ACK or NACK naming a
transaction is held for its COMMIT here. Each handler is a coroutine of a frame that
returns when the frame is done (its RECEIPT may go) and raises what the error map turns
into an ERROR. Made at CONNECT, for the negotiated version and the logged-in account; none
touches a socket. This module only assembles them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Coroutine
from typing import Any

from rocketport.core.broker import Broker

from .codec import Frame
from .deliver import Deliverer, Write
from .destinations import Destinations
from .login import Login
from .publish import Publisher
from .transactions import Transactions

Handler = Callable[[Frame], Coroutine[Any, Any, None]]


class StompHandlers:
    """One connection's handlers, after its CONNECT was accepted."""

    def __init__(self, broker: Broker, login: Login, peer: tuple[str, int],
                 serials: itertools.count, write: Write, write_paused: Callable[[], bool],
                 written: set[str]) -> None:
        dests = Destinations()
        self.publish = Publisher(broker, login.account, dests, peer, written)
        self.deliver = Deliverer(broker, login.account, login.version, dests, serials, write,
                                 write_paused)
        self.transactions = tx = Transactions(self.publish, self.deliver)
        self.table: dict[str, Handler] = {
            "SEND": self._send, "SUBSCRIBE": self.deliver.subscribe,
            "UNSUBSCRIBE": self.deliver.unsubscribe, "ACK": self._ack, "NACK": self._nack,
            "BEGIN": tx.begin, "COMMIT": tx.commit, "ABORT": tx.abort,
        }

    async def _send(self, frame: Frame) -> None:
        tx = frame.headers.get("transaction")
        reply_to = frame.headers.get("reply-to")
        if reply_to is not None and reply_to.startswith("/temp-queue/"):
            await self.deliver.subscribe_temporary(reply_to)  # before the request can be answered
        if tx is not None:
            self.transactions.hold(tx, frame)
            return
        await self.publish.send(frame)

    async def _ack(self, frame: Frame) -> None:
        tx = frame.headers.get("transaction")
        if tx is not None:
            self.deliver.find(frame)  # refused now, not at COMMIT, when it names nothing
            self.transactions.hold(tx, frame)
            return
        self.deliver.ack(frame)

    async def _nack(self, frame: Frame) -> None:
        tx = frame.headers.get("transaction")
        if tx is not None:
            self.deliver.find(frame)
            self.transactions.hold(tx, frame)
            return
        await self.deliver.nack(frame)
