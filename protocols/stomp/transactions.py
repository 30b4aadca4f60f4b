"""STOMP transactions: BEGIN, then SEND/ACK/NACK frames held, applied in order at COMMIT.

A transaction spans both directions, so it holds frames, not messages: at COMMIT every
held SEND is made a message first (one bad frame refuses the commit before anything is
stored), then the frames are applied in the order they came, SENDs through the publisher,
ACKs and NACKs through the deliverer. ABORT forgets them. Nothing is written here.
"""

from __future__ import annotations

from .codec import Frame
from .deliver import Deliverer
from .errors import StompError
from .publish import Publisher


class Transactions:
    """One connection's open transactions, by name."""

    def __init__(self, publish: Publisher, deliver: Deliverer) -> None:
        self._publish = publish
        self._deliver = deliver
        self._open: dict[str, list[Frame]] = {}

    def hold(self, tx: str, frame: Frame) -> None:
        """Keep a SEND, ACK or NACK of transaction ``tx`` for its COMMIT."""
        try:
            self._open[tx].append(frame)
        except KeyError:
            raise StompError(f"transaction {tx[:64]!r} was not begun") from None

    async def begin(self, frame: Frame) -> None:
        tx = _tx_id(frame)
        if tx in self._open:
            raise StompError(f"transaction {tx[:64]!r} is already open")
        self._open[tx] = []

    async def commit(self, frame: Frame) -> list[str]:
        """Apply the held frames in order; the receipts they asked for, which the session
        sends after the COMMIT's own, as RabbitMQ does (none before: a held frame is not done)."""
        frames = self._open.pop(_tx_id(frame), None)
        if frames is None:
            raise StompError(f"transaction {_tx_id(frame)[:64]!r} was not begun")
        messages = [self._publish.message(f) for f in frames if f.command == "SEND"]  # all checked first
        sends = iter(messages)
        for f in frames:
            if f.command == "SEND":
                await self._publish.store(next(sends))
            elif f.command == "ACK":
                self._deliver.ack(f)
            else:
                await self._deliver.nack(f)
        return [receipt for f in frames if (receipt := f.headers.get("receipt")) is not None]

    async def abort(self, frame: Frame) -> None:
        if self._open.pop(_tx_id(frame), None) is None:
            raise StompError(f"transaction {_tx_id(frame)[:64]!r} was not begun")

    def clear(self) -> None:
        """Forget every open transaction (the connection is gone: nothing is applied)."""
        self._open.clear()


def _tx_id(frame: Frame) -> str:
    tx = frame.headers.get("transaction")
    if not tx:
        raise StompError(f"{frame.command} needs a transaction header")
    return tx
