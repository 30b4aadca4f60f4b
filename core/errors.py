"""Typed, protocol-neutral errors raised by the core.

Each front-end maps these to its own error codes in one place (a remoting response code,
a Kafka error code, a STOMP ERROR frame). Never put protocol codes here.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every error the core reports to a front-end."""


class ConfigError(BrokerError):
    """A configuration key is unknown or its value is invalid."""


class TopicNotFound(BrokerError):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class InvalidTopicName(BrokerError):
    def __init__(self, topic: str, reason: str) -> None:
        super().__init__(f"invalid topic name {topic!r}: {reason}")
        self.topic = topic


class QueueNotFound(BrokerError):
    def __init__(self, topic: str, queue_id: int) -> None:
        super().__init__(f"topic {topic!r} has no queue {queue_id}")
        self.topic = topic
        self.queue_id = queue_id


class MessageTooLarge(BrokerError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message of {size} bytes exceeds maxMessageSize {limit}")
        self.size = size
        self.limit = limit


class InvalidMessage(BrokerError):
    """A message is malformed (bad properties, bad batch, empty topic...)."""


class StoreUnavailable(BrokerError):
    """The store is shut down, read-only, or out of disk space."""


class MessageNotFound(BrokerError):
    """No message at the given id / commit-log offset."""


class ConsumeDisabled(BrokerError):
    """The subscription group's consumeEnable is false: pulls are refused."""

    def __init__(self, group: str) -> None:
        super().__init__(f"consumer group {group!r} is not allowed to consume")
        self.group = group


class TransactionMismatch(BrokerError):
    """END_TRANSACTION names a message that is not the producer group's half message."""


class GroupNotFound(BrokerError):
    """The subscription group does not exist and autoCreateSubscriptionGroup is off."""

    def __init__(self, group: str) -> None:
        super().__init__(f"subscription group {group!r} does not exist")
        self.group = group
