"""The one place where failures become remoting response codes.

Handlers raise the core's typed errors (``core.errors``), the codec's decoding errors or
`RemotingError` (a code chosen by a handler); the session turns whatever escapes a handler
into an error response here. Nothing else in the front-end picks an error code for an
exception, so a core error answers every remoting request the same way. This module must
never do I/O.
"""

from __future__ import annotations

from rocketport.core.errors import (
    BrokerError,
    ConsumeDisabled,
    GroupNotFound,
    InvalidMessage,
    InvalidTopicName,
    MessageNotFound,
    MessageTooLarge,
    QueueNotFound,
    StoreUnavailable,
    TopicNotFound,
    TopicNotReadable,
    TransactionMismatch,
)
from rocketport.core.facade.types import FilterError

from .bodies import BodyError
from .codes import ResponseCode
from .headers import HeaderError
from .messages import MessageFormatError


class RemotingError(Exception):
    """A handler's deliberate answer: response `code` with `remark`."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


# Most specific first: the first matching class wins.
_CODES: tuple[tuple[type[BaseException], ResponseCode], ...] = (
    (TopicNotFound, ResponseCode.TOPIC_NOT_EXIST),
    (TopicNotReadable, ResponseCode.NO_PERMISSION),
    (QueueNotFound, ResponseCode.SYSTEM_ERROR),
    (InvalidTopicName, ResponseCode.MESSAGE_ILLEGAL),
    (MessageTooLarge, ResponseCode.MESSAGE_ILLEGAL),
    (InvalidMessage, ResponseCode.MESSAGE_ILLEGAL),
    (MessageNotFound, ResponseCode.SYSTEM_ERROR),
    (GroupNotFound, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    (ConsumeDisabled, ResponseCode.NO_PERMISSION),
    (TransactionMismatch, ResponseCode.TRANSACTION_STATE_GROUP_WRONG),
    (StoreUnavailable, ResponseCode.SERVICE_NOT_AVAILABLE),
    (FilterError, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
    (HeaderError, ResponseCode.SYSTEM_ERROR),
    (BodyError, ResponseCode.SYSTEM_ERROR),
    (MessageFormatError, ResponseCode.MESSAGE_ILLEGAL),
    (BrokerError, ResponseCode.SYSTEM_ERROR),
)


def code_for(exc: BaseException) -> tuple[ResponseCode, str]:
    """(response code, remark) for an exception that escaped a handler."""
    if isinstance(exc, RemotingError):
        return exc.code, exc.remark
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code, str(exc)
    return ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
