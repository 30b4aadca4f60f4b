"""What a read returns: zero-copy slices of the CommitLog plus the queue's offsets."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from rocketport.common.batch.messages import DEFAULT_TAG_HEADER
from rocketport.common.message import MessageExt

from .inner_batch import StoredBatch, batches_of
from .record import decode_record
from .stored_message import stored_messages

if TYPE_CHECKING:
    from ..filter.base import MessageFilter


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class Segment:
    """Either ``count`` contiguous CommitLog records (``batch_base`` is None), or one inner
    batch record of which logical offsets [first_offset, first_offset + count) are wanted
    (``batch_base`` is the batch's first logical offset)."""

    view: memoryview
    first_offset: int
    count: int
    batch_base: int | None = None

    @property
    def is_inner_batch(self) -> bool:
        return self.batch_base is not None


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    segments: list[Segment] = field(default_factory=list)
    message_count: int = 0
    total_bytes: int = 0

    def messages(self, tag_header: str = DEFAULT_TAG_HEADER,
                 message_filter: MessageFilter | None = None) -> Iterator[MessageExt]:
        """Decode every message (copies): plain records, and the wanted records of inner
        batches through the one expander (core.store.inner_batch: each batch decoded once,
        however many segments or reads ask for it). Give the read's ``message_filter`` to
        have batch records checked one by one (the store filtered plain records already)."""
        for seg, batch in batches_of(self.segments):
            if batch is not None:
                yield from _batch_messages(seg, batch, tag_header, message_filter)
                continue
            view, pos = seg.view, 0
            for _ in range(seg.count):
                msg = decode_record(view, pos)
                pos += msg.store_size
                yield msg

    def stored_messages(self, tag_header: str = DEFAULT_TAG_HEADER,
                        message_filter: MessageFilter | None = None) -> list[MessageExt]:
        """`messages`, with each plain record a `StoredMessage` (a copy of its record,
        decoded as its fields are read): what a delivery group holds and hands out."""
        out: list[MessageExt] = []
        for seg, batch in batches_of(self.segments):
            if batch is not None:
                out.extend(_batch_messages(seg, batch, tag_header, message_filter))
            else:
                out.extend(stored_messages(seg.view, seg.first_offset, seg.count))
        return out


def _batch_messages(seg: Segment, batch: StoredBatch, tag_header: str,
                    message_filter: MessageFilter | None) -> list[MessageExt]:
    """The records of an inner batch that ``seg`` wants and the filter takes."""
    return batch.messages([i for _, i in batch.matching(seg.first_offset, seg.count,
                                                        message_filter, tag_header)], tag_header)
