"""Rocketport's native Python client for RocketMQ 4.x brokers (any of them, not only ours).

asyncio first: every class here is used inside a running event loop
(``async with Producer(...) as p: await p.send(msg)``); `rocketport.client.sync` wraps the
same classes for scripts, and Trio programs use them through trio-asyncio. The wire format
is the shared remoting codec (`rocketport.protocols.remoting`); this package adds routing,
connections, producers, consumers, transactions and administration on top of it.
"""

from .admin import AdminClient
from .errors import ClientError
from .message import (
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
)
from .process_queue import ProcessQueueInfo
from .producer import Producer
from .pull import PullConsumer
from .push import PushConsumer
from .selectors import (
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
)
from .transaction import TransactionProducer

__all__ = [
    "AdminClient",
    "ClientError",
    "ConsumeResult",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "ProcessQueueInfo",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByMachineRoom",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
]
