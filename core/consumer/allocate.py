"""Queue allocation strategies: which of a group's queues one consumer takes.

Each client of a clustering group computes its own share from the same inputs (every queue
of the topic, every client id of the group), so the strategies must be pure and
deterministic: equal inputs in equal order give every client a disjoint slice, and together
the slices cover every queue. The results match RocketMQ's AllocateMessageQueueAveragely
("AVG") and AllocateMessageQueueAveragelyByCircle ("AVG_BY_CIRCLE") so that Rocketport's
own clients and group coordinators split queues exactly as RocketMQ clients of the same
group do. As in RocketMQ's RebalanceImpl, callers pass both lists sorted.

These functions never sort, deduplicate or look anything up: they only slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

Q = TypeVar("Q")


def allocate_averagely(mq_all: Sequence[Q], cid_all: Sequence[str], current_cid: str) -> list[Q]:
    """A contiguous block of queues; the first ``len(mq) % len(cid)`` clients get one more.

    8 queues over 3 clients: [q0 q1 q2] [q3 q4 q5] [q6 q7]. With more clients than
    queues the trailing clients get nothing. A client not in ``cid_all`` gets nothing.
    """
    index = _client_index(mq_all, cid_all, current_cid)
    if index < 0:
        return []
    base, extra = divmod(len(mq_all), len(cid_all))
    if index < extra:
        start, size = index * (base + 1), base + 1
    else:
        start, size = index * base + extra, base
    return list(mq_all[start : start + size])


def allocate_averagely_by_circle(
    mq_all: Sequence[Q], cid_all: Sequence[str], current_cid: str
) -> list[Q]:
    """Every ``len(cid)``-th queue starting at the client's position, dealt like cards.

    8 queues over 3 clients: [q0 q3 q6] [q1 q4 q7] [q2 q5]. A client not in ``cid_all``
    gets nothing.
    """
    index = _client_index(mq_all, cid_all, current_cid)
    if index < 0:
        return []
    return list(mq_all[index :: len(cid_all)])


def _client_index(mq_all: Sequence[object], cid_all: Sequence[str], current_cid: str) -> int:
    """Position of ``current_cid`` in ``cid_all`` (-1 if absent); rejects empty inputs as
    RocketMQ does, since an empty list here means the caller's view is broken."""
    if not current_cid:
        raise ValueError("current client id is empty")
    if not mq_all:
        raise ValueError("no message queues to allocate")
    if not cid_all:
        raise ValueError("no client ids to allocate to")
    return cid_all.index(current_cid) if current_cid in cid_all else -1
