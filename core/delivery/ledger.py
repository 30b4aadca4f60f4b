"""Which offsets of one queue a delivery group still owes an answer for.

A server-side group hands messages out one by one and gets acks in any order, yet its
committed offset (what a restart resumes from, what lag is measured against) must never
pass a message that was not acknowledged: it is the lowest outstanding offset, or the read
position when nothing is outstanding. Offsets enter in increasing order (reads are
sequential), so a deque plus a set of finished offsets gives that answer in amortised O(1).
"""

from __future__ import annotations

from collections import deque


class QueueLedger:
    __slots__ = ("topic", "queue_id", "read_to", "_outstanding", "_finished")

    def __init__(self, topic: str, queue_id: int, read_to: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.read_to = read_to  # next offset to read
        self._outstanding: deque[int] = deque()
        self._finished: set[int] = set()

    def taken(self, offsets: list[int]) -> None:
        """Messages read at ``offsets`` (increasing) now wait for their answers."""
        self._outstanding.extend(offsets)

    def finished(self, offset: int) -> None:
        """The message at ``offset`` is acknowledged, dead-lettered or dropped."""
        outstanding = self._outstanding
        if outstanding and outstanding[0] == offset:
            outstanding.popleft()
            finished = self._finished
            while outstanding and outstanding[0] in finished:
                finished.discard(outstanding.popleft())
        else:
            self._finished.add(offset)

    @property
    def committed(self) -> int:
        return self._outstanding[0] if self._outstanding else self.read_to

    @property
    def outstanding(self) -> int:
        return len(self._outstanding) - len(self._finished)
