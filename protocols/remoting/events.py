"""Events a `RemotingConnection` reports for the bytes it was fed.

Small immutable records, one per thing a session must react to. This module must never
hold behaviour beyond the records themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from .command import RemotingCommand


# Not frozen: a frozen dataclass costs a third more to build, and one is built per frame.
@dataclass(slots=True)
class CommandReceived:
    """A complete, well-formed frame arrived."""

    command: RemotingCommand


@dataclass(slots=True)
class ProtocolError:
    """A frame could not be decoded.

    `opaque` is set when the request's opaque could still be read, so the session can
    answer with an error response. `fatal` means the byte stream can no longer be trusted
    to be in step (bad length, unknown serialize type): the session must close the
    connection, and the connection reports nothing more. A non-fatal error affects only
    its own frame; later frames are decoded normally.
    """

    reason: str
    opaque: int | None
    fatal: bool
