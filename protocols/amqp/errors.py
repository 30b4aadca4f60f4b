"""AMQP reply codes, and the one place core errors become them.

A channel error (`ChannelError`) closes its channel and leaves the connection and its other
channels working; a `ConnectionError_` closes the connection. Handlers raise these; the
session turns them into channel.close / connection.close.
"""

from __future__ import annotations

from enum import IntEnum

from rocketport.core.auth.plain_acl import AclError
from rocketport.core.errors import (
    BrokerError,
    InvalidMessage,
    InvalidTopicName,
    MessageTooLarge,
    NotMaster,
    StoreUnavailable,
    TopicNotFound,
)


class Reply(IntEnum):
    REPLY_SUCCESS = 200
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313
    CONNECTION_FORCED = 320
    INVALID_PATH = 402
    ACCESS_REFUSED = 403
    NOT_FOUND = 404
    RESOURCE_LOCKED = 405
    PRECONDITION_FAILED = 406
    FRAME_ERROR = 501
    SYNTAX_ERROR = 502
    COMMAND_INVALID = 503
    CHANNEL_ERROR = 504
    UNEXPECTED_FRAME = 505
    RESOURCE_ERROR = 506
    NOT_ALLOWED = 530
    NOT_IMPLEMENTED = 540
    INTERNAL_ERROR = 541


class ChannelError(Exception):
    """Closes the channel: channel.close with ``code`` and the failing method's ids."""

    def __init__(self, code: Reply, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = f"{code.name} - {text}"


class ConnectionError_(Exception):
    """Closes the connection (503 command invalid, 504 channel error, 530 not allowed ...)."""

    def __init__(self, code: Reply, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = f"{code.name} - {text}"


def channel_error(exc: BrokerError | OSError) -> ChannelError:
    """A core error as the channel error a RabbitMQ client would get for it; an OSError the
    store did not type (a descriptor limit, a failing disk) is a resource error, as
    RabbitMQ answers a queue it cannot write."""
    if isinstance(exc, OSError):
        return ChannelError(Reply.RESOURCE_ERROR, str(exc))
    if isinstance(exc, AclError):
        return ChannelError(Reply.ACCESS_REFUSED, str(exc))
    if isinstance(exc, TopicNotFound):
        return ChannelError(Reply.NOT_FOUND, str(exc))
    if isinstance(exc, (InvalidTopicName, InvalidMessage)):
        return ChannelError(Reply.PRECONDITION_FAILED, str(exc))
    if isinstance(exc, MessageTooLarge):
        return ChannelError(Reply.PRECONDITION_FAILED, str(exc))
    if isinstance(exc, NotMaster):  # no retry here helps: the client goes to the master
        return ChannelError(Reply.PRECONDITION_FAILED, str(exc))
    if isinstance(exc, StoreUnavailable):
        return ChannelError(Reply.RESOURCE_ERROR, str(exc))
    return ChannelError(Reply.INTERNAL_ERROR, str(exc))


def not_master(broker_name: str, what: str) -> ChannelError:
    """A write reaching a slave, refused before the store would (`NotMaster`): 406, a
    channel error as the spec's PRECONDITION_FAILED is (320 CONNECTION_FORCED is a
    connection's), so the client's other channels stay; ``what`` says what only the master
    takes."""
    return ChannelError(Reply.PRECONDITION_FAILED, f"broker '{broker_name}' is a slave: {what} its master")
