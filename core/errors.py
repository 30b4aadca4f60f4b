"""Typed, protocol-neutral errors raised by the core.

Each front-end maps these to its own error codes in one place (a remoting response code,
a Kafka error code, a STOMP ERROR frame). Never put protocol codes here.
"""

from __future__ import annotations

# the shared formats' errors are part of the core's set: front-ends import them from here
from rocketport.common.errors import BrokerError, InvalidMessage, MessageNotFound  # noqa: F401


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


class TopicNotReadable(BrokerError):
    """The topic's perm lacks PERM_READ: nobody may read it, whatever the protocol."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} is not readable")
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


class StoreUnavailable(BrokerError):
    """The store is shut down, read-only, or out of disk space."""


class DiskFull(StoreUnavailable):
    """The store's disk has no space for a file a put needs (ENOSPC, EDQUOT).

    Raised before anything of the put is written, so the put is simply refused; the next
    put tries again, so writes resume by themselves once space returns."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the disk is full: {detail}")


class StoreLocked(BrokerError):
    """Another live process holds the store directory's lock: one broker per store."""

    def __init__(self, root: str, holder_pid: int | None) -> None:
        who = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(f"store {root} is in use by {who} (one broker per store)")
        self.root = root
        self.holder_pid = holder_pid


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


class NotMaster(StoreUnavailable):
    """A put reached a slave (brokerRole=SLAVE): only the master of a broker group writes.

    RocketMQ answers SERVICE_NOT_AVAILABLE ("messages are put to the slave"); Kafka
    NOT_LEADER_OR_FOLLOWER. Nothing was written."""

    def __init__(self, broker_name: str) -> None:
        super().__init__(f"broker {broker_name!r} is a slave: messages are put to its master")


class ReplicaNotInSync(BrokerError):
    """SYNC_MASTER: the put is stored on the master, but no slave acknowledged it.

    ``result`` is the put's own (the message stays stored: a front-end answers with it where
    its protocol carries one, as RocketMQ's send response carries the msgId)."""

    def __init__(self, detail: str, result: object = None) -> None:
        super().__init__(detail)
        self.result = result


class FlushSlaveTimeout(ReplicaNotInSync):
    """No slave acknowledged the put within syncFlushTimeout (RocketMQ's FLUSH_SLAVE_TIMEOUT)."""


class SlaveNotAvailable(ReplicaNotInSync):
    """No slave is connected, or none is within haSlaveFallbehindMax of the master
    (RocketMQ's SLAVE_NOT_AVAILABLE): the put is not waited for."""
