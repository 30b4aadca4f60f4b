"""The per-queue read rule of in-place transactions: last stable offset and aborted ranges.

A queue written by a transaction gets a `QueueTxnState`: the first offsets of the open
transactions writing to it (by producer id) and the aborted ranges. The LSO is the smallest
open first offset, else the queue's max offset. `drop_invisible` removes from a read's
result what no reader but a Kafka consumer may see: control batches (transaction markers)
and the batches of an aborted range's producer inside that range. Queues that never saw a
transaction have no state, so their reads pay nothing. Never touches the store itself.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final

from rocketport.common.batch.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

from ..store.get_result import GetResult, GetStatus
from ..store.record import HEADER_SIZE

# a stored inner batch's body is the record batch: attributes at 21, producer id at 43
_ATTRIBUTES: Final = struct.Struct(">h")
_PRODUCER_ID: Final = struct.Struct(">q")
_ATTR_POS: Final = HEADER_SIZE + 21
_PID_POS: Final = HEADER_SIZE + 43


class Isolation(enum.Enum):
    """What a read may see of a queue's transactions."""

    VISIBLE = "visible"  # every protocol's reader: below the LSO, markers and aborted batches removed
    KAFKA_UNCOMMITTED = "read_uncommitted"  # everything, markers included (the client skips them)
    KAFKA_COMMITTED = "read_committed"  # below the LSO, markers and aborted batches kept: the
    # client drops the aborted ones with the fetch's aborted_transactions (KIP-98)


@dataclass(slots=True)
class AbortedRange:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class QueueTxnState:
    """One queue's open transactions and aborted ranges."""

    __slots__ = ("open", "aborted")

    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedRange] = []  # in marker order

    def lso(self, max_offset: int) -> int:
        return min(self.open.values()) if self.open else max_offset

    def aborted_between(self, start: int, end: int) -> list[AbortedRange]:
        """Aborted ranges overlapping [start, end)."""
        return [r for r in self.aborted if r.last_offset >= start and r.first_offset < end]

    def forget_before(self, min_offset: int) -> None:
        """Drop ranges wholly below the queue's min offset (retention removed them)."""
        self.aborted = [r for r in self.aborted if r.last_offset >= min_offset]

    def drop_invisible(self, result: GetResult) -> None:
        """Remove markers and aborted batches from ``result`` (in place)."""
        kept = []
        dropped = 0
        for seg in result.segments:
            if seg.batch_base is not None:
                view = seg.view
                (attributes,) = _ATTRIBUTES.unpack_from(view, _ATTR_POS)
                if attributes & ATTR_CONTROL:
                    dropped += seg.count
                    continue
                if attributes & ATTR_TRANSACTIONAL and self.aborted:
                    (pid,) = _PRODUCER_ID.unpack_from(view, _PID_POS)
                    offset = seg.first_offset
                    if any(r.producer_id == pid and r.first_offset <= offset <= r.last_offset
                           for r in self.aborted):
                        dropped += seg.count
                        continue
            kept.append(seg)
        if dropped:
            result.segments = kept
            result.message_count -= dropped
            if not result.message_count:
                result.status = GetStatus.NO_MATCHED_MESSAGE
