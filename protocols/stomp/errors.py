"""The one place where an error becomes a STOMP ERROR frame's ``message`` header.

STOMP has no error codes, so the map is to text: what the client did wrong (`StompError`,
a `DestinationError`) is said as it is; a core error (`core/errors.py`) is said with the
kind of failure first, in the words RabbitMQ uses for the same refusals over AMQP and STOMP
(``NOT_FOUND - ...``, ``ACCESS_REFUSED - ...``, ``PRECONDITION_FAILED - ...``,
``RESOURCE_ERROR - ...``), so a client can tell "fix the request" from "try again later";
anything else is a bug of ours and says only its type. This module decides nothing else:
it never logs, writes or closes.
"""

from __future__ import annotations

from typing import Final

from rocketport.core.auth.plain_acl import AclError
from rocketport.core.errors import (
    BrokerError,
    ConsumeDisabled,
    GroupNotFound,
    InvalidMessage,
    InvalidTopicName,
    MessageNotFound,
    MessageTooLarge,
    NotMaster,
    QueueNotFound,
    StoreUnavailable,
    TopicNotFound,
    TopicNotReadable,
)
from rocketport.core.facade.types import FilterError

from .destinations import DestinationError


class StompError(Exception):
    """What the client did wrong; the text is the ERROR frame's message."""


_KINDS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (AclError, "ACCESS_REFUSED"),
    (TopicNotReadable, "ACCESS_REFUSED"),
    (ConsumeDisabled, "ACCESS_REFUSED"),
    (TopicNotFound, "NOT_FOUND"),
    (QueueNotFound, "NOT_FOUND"),
    (GroupNotFound, "NOT_FOUND"),
    (MessageNotFound, "NOT_FOUND"),
    (InvalidTopicName, "PRECONDITION_FAILED"),
    (InvalidMessage, "PRECONDITION_FAILED"),
    (MessageTooLarge, "PRECONDITION_FAILED"),
    (FilterError, "PRECONDITION_FAILED"),
    (NotMaster, "PRECONDITION_FAILED"),  # a slave's refusal is for good: the client goes to its master
    (StoreUnavailable, "RESOURCE_ERROR"),
    (OSError, "RESOURCE_ERROR"),  # a limit or fault of the store's files it did not type
)


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` refuses the client's request (said to it), rather than a bug of ours."""
    return isinstance(exc, (StompError, DestinationError, BrokerError, FilterError, OSError))


def error_message(exc: BaseException) -> str:
    """The ERROR frame's message for ``exc``."""
    if isinstance(exc, (StompError, DestinationError)):
        return str(exc)
    for kind, name in _KINDS:
        if isinstance(exc, kind):
            return f"{name} - {exc}"
    if isinstance(exc, BrokerError):
        return f"INTERNAL_ERROR - {exc}"
    return f"internal error: {type(exc).__name__}"
