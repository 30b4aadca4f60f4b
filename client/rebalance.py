"""Queue allocation among the consumers of a group (RocketMQ's AllocateMessageQueue*).

Every consumer of a group sees the same sorted queue list and the same sorted consumer
ids, so each computes its own share without talking to the others. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketport.protocols.remoting.bodies import MessageQueue

Allocate = Callable[[list[MessageQueue], list[str], str], list[MessageQueue]]


def allocate_averagely(queues: list[MessageQueue], consumers: list[str], me: str) -> list[MessageQueue]:
    """Contiguous blocks: the first `len(queues) % len(consumers)` consumers get one more."""
    if me not in consumers or not queues:
        return []
    index, n, m = consumers.index(me), len(consumers), len(queues)
    mod = m % n
    size = (m // n + (1 if index < mod else 0)) if m > n else 1
    start = index * size if mod > 0 and index < mod else index * size + mod
    return queues[start:start + max(0, min(size, m - start))] if start < m else []


def allocate_averagely_by_circle(queues: list[MessageQueue], consumers: list[str],
                                 me: str) -> list[MessageQueue]:
    """Dealt round-robin: consumer i gets queues i, i + n, i + 2n, ..."""
    if me not in consumers:
        return []
    return queues[consumers.index(me)::len(consumers)]


STRATEGIES: dict[str, Allocate] = {"avg": allocate_averagely,
                                   "avg_by_circle": allocate_averagely_by_circle}
