"""Dispatch: a stored record's ConsumeQueue entries into their queue, and pulls woken.

`StoreDispatch` is one of the classes `MessageStore` (core/store/message_store.py) is made
of; its methods are plain methods of the store, called on the put hot paths without any
delegation. `_Dispatch` is what a put (core/store/writer.py) or recovery
(core/store/recovery.py) hands over: the entries of one record, or of one run of records of
a queue, and the CommitLog offset just past them. Under SYNC_FLUSH with dispatchAfterFlush
a put's dispatches wait in ``_pending`` until the flush service reports the fsync that
covers them (`_on_flushed`), so a consumer never sees a message a power loss could take
back; otherwise they are made at once.

This module never writes the CommitLog, never assigns queue offsets (the writer does) and
never reads for a consumer (core/store/reader.py does).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketport.common.message import PROPERTY_TAGS
from rocketport.common.tags import tags_code

from .consume_queue import CQ_ENTRY_SIZE, ConsumeQueue
from .state import StoreState


@dataclass(slots=True)
class _Dispatch:
    topic: str
    queue_id: int
    queue_offset: int
    entries: bytes
    end: int  # commit-log offset just past the record(s)


class StoreDispatch(StoreState):
    """ConsumeQueue creation and dispatch (the store's state: see MessageStore.__init__)."""

    def _consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self.cq_root, topic, queue_id,
                              self.config.mapped_file_size_consume_queue, self._preparer, written=self._written)
            self.consume_queues[key] = cq
        return cq

    def _code_of(self, topic: str, properties: dict[str, str]) -> int:
        """The tags code a ConsumeQueue entry carries (the TAGS hash unless the store was
        given another rule: delay topics)."""
        if self._tags_code_of is not None:
            return self._tags_code_of(topic, properties)
        return tags_code(properties.get(PROPERTY_TAGS)) if properties else 0

    def _dispatch(self, d: _Dispatch, notify: bool = True) -> None:
        cq = self.consume_queues.get((d.topic, d.queue_id)) or self._consume_queue(d.topic, d.queue_id)
        cq.put(d.queue_offset, d.entries, d.end)
        self.dispatched_offset = d.end
        if notify:
            max_offset = d.queue_offset + len(d.entries) // CQ_ENTRY_SIZE
            for listener in self.dispatch_listeners:
                listener(d.topic, d.queue_id, max_offset)

    def _on_flushed(self, flushed: int) -> None:
        pending = self._pending
        while pending and pending[0].end <= flushed:
            self._dispatch(pending.popleft())
