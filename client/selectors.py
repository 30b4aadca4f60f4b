"""The queue selectors RocketMQ's Java client ships, for `Producer.send(selector=...)`.

A selector is called as `selector(queues, msg, arg)` with the topic's writable queues and
returns one of them. SelectMessageQueueByHash picks by `arg`'s hash with Java's own hash
functions, so a Python and a Java producer put the same key on the same queue (Python's
`hash()` of a str changes from one process to the next and would scatter a key's order).
Pure functions of their input (and of `random` for the random ones); no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from rocketport.protocols.remoting.bodies import MessageQueue

from .errors import ClientError
from .message import Message

_INT32 = 1 << 32


def _to_int32(value: int) -> int:
    value &= _INT32 - 1
    return value - _INT32 if value >= 1 << 31 else value


def java_hash_code(arg: Any) -> int:
    """`arg.hashCode()` as Java computes it for the types a key arrives as: String (over
    UTF-16 code units), Integer and Long (a Python int in int32 range is an Integer,
    beyond it a Long), Boolean."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < 1 << 31:
            return arg
        if not -(1 << 63) <= arg < 1 << 63:
            raise ClientError(f"hash selector: {arg} does not fit a Java long")
        value = arg & ((1 << 64) - 1)
        return _to_int32(value ^ (value >> 32))
    if isinstance(arg, str):
        h = 0
        units = arg.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & (_INT32 - 1)
        return _to_int32(h)
    raise ClientError(f"hash selector: arg must be a str, int or bool, not {type(arg).__name__}")


class SelectMessageQueueByHash:
    """The queue at `abs(hashCode(arg) % len(queues))`, as the Java selector computes it."""

    def __call__(self, queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        h = java_hash_code(arg)
        return queues[abs(h) % len(queues)]  # Java's remainder keeps the sign: same index


class SelectMessageQueueByRandom:
    """Any queue, uniformly."""

    def __call__(self, queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return random.choice(queues)


class SelectMessageQueueByMachineRoom:
    """A queue of a broker in one of `consumeridcs`, the machine rooms (IDCs) whose
    consumers should get the message. A broker's room is what its name says before '@'
    ("idc1@broker-a"), as AllocateMessageQueueByMachineRoom reads it. Among those queues,
    `arg`'s hash picks when given (ordered sends), else chance. (The Java class of this
    name is an unfinished stub that returns null; this one does what its name says.)"""

    def __init__(self, consumeridcs: Iterable[str]) -> None:
        self.consumeridcs = frozenset(consumeridcs)

    def __call__(self, queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        local = [mq for mq in queues if _room(mq.broker_name) in self.consumeridcs]
        if not local:
            raise ClientError(f"no writable queue of {msg.topic} in machine rooms "
                              f"{sorted(self.consumeridcs)}")
        if arg is None:
            return random.choice(local)
        return local[abs(java_hash_code(arg)) % len(local)]


def _room(broker_name: str) -> str | None:
    parts = broker_name.split("@")
    return parts[0] if len(parts) == 2 else None
