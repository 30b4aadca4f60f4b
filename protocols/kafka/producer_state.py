"""Idempotent-producer state: producer ids, and per (producer, partition) sequence checks.

Kafka's idempotent producer numbers each partition's batches; a retried batch that was
already stored must be acknowledged again (with its original offset) instead of being
stored twice, and a gap means data was lost in between, which the producer must hear as
OUT_OF_ORDER_SEQUENCE_NUMBER. Like Kafka, the last five batches per partition are
remembered for duplicate detection. State is saved to a JSON file under the store root so a
restarted broker still recognises retries; the file is written by the owner (the Kafka
front-end) periodically and at shutdown, never from here on the event loop.

This module never touches sockets, the store or the codec.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Any, Final

from rocketport.core.metadata.json_file import JsonFile

_WINDOW: Final = 5  # batches remembered per partition (Kafka's max.in.flight for idempotence)
_INT32_MAX: Final = 0x7FFFFFFF
NO_PRODUCER_ID: Final = -1


class SequenceCheck(enum.Enum):
    ACCEPT = "accept"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"
    FENCED = "fenced"  # an older epoch than the one already seen


@dataclass(slots=True)
class _BatchEntry:
    first_seq: int
    last_seq: int
    base_offset: int  # -1 while the append is still in flight


@dataclass(slots=True)
class _PartitionState:
    epoch: int
    batches: list[_BatchEntry] = field(default_factory=list)


def _next_seq(seq: int) -> int:
    return 0 if seq == _INT32_MAX else seq + 1


class ProducerStateManager:
    """Producer ids and sequence windows; checks run synchronously, so pipelined requests
    of one producer are judged in arrival order even while an earlier append awaits."""

    def __init__(self, store_root: str) -> None:
        self.file = JsonFile(os.path.join(store_root, "config", "kafkaProducerState.json"))
        self.next_producer_id = 1000
        self._partitions: dict[tuple[int, str, int], _PartitionState] = {}
        self.dirty = False

    # ------------------------------------------------------------------ persistence
    def load(self) -> None:
        data = self.file.load()
        if not data:
            return
        self.next_producer_id = int(data.get("nextProducerId", self.next_producer_id))
        for row in data.get("partitions", []):
            state = _PartitionState(int(row["epoch"]),
                                    [_BatchEntry(int(b[0]), int(b[1]), int(b[2])) for b in row["batches"]])
            self._partitions[(int(row["producerId"]), row["topic"], int(row["partition"]))] = state

    def snapshot(self) -> dict[str, Any]:
        """A plain copy to save from a worker thread; clears the dirty mark."""
        self.dirty = False
        return {
            "nextProducerId": self.next_producer_id,
            "partitions": [
                {"producerId": pid, "topic": topic, "partition": partition, "epoch": s.epoch,
                 "batches": [[b.first_seq, b.last_seq, b.base_offset] for b in s.batches if b.base_offset >= 0]}
                for (pid, topic, partition), s in self._partitions.items()
            ],
        }

    # ------------------------------------------------------------------ producer ids
    def allocate_producer_id(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        self.dirty = True
        return pid

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._partitions if k[1] == topic]:
            del self._partitions[key]
        self.dirty = True

    # ------------------------------------------------------------------ sequences
    def check(self, producer_id: int, epoch: int, topic: str, partition: int,
              first_seq: int, count: int) -> tuple[SequenceCheck, int]:
        """Judge a batch; (verdict, original base offset for a duplicate else -1).

        An accepted batch is recorded at once as in flight; the caller reports its offset
        with :meth:`stored` or withdraws it with :meth:`failed`.
        """
        last_seq = first_seq + count - 1
        if last_seq > _INT32_MAX:  # sequences wrap to 0 after INT32_MAX
            last_seq -= _INT32_MAX + 1
        key = (producer_id, topic, partition)
        state = self._partitions.get(key)
        if state is not None:
            if epoch < state.epoch:
                return SequenceCheck.FENCED, -1
            if epoch == state.epoch and state.batches:
                for b in state.batches:
                    if b.first_seq == first_seq and b.last_seq == last_seq:
                        return SequenceCheck.DUPLICATE, b.base_offset
                if first_seq != _next_seq(state.batches[-1].last_seq):
                    return SequenceCheck.OUT_OF_ORDER, -1
            elif epoch > state.epoch:
                if first_seq != 0:
                    return SequenceCheck.OUT_OF_ORDER, -1
                state.epoch = epoch
                state.batches.clear()
        else:
            # An unknown producer (new, or older than what was persisted) starts anywhere.
            state = self._partitions[key] = _PartitionState(epoch)
        state.batches.append(_BatchEntry(first_seq, last_seq, -1))
        if len(state.batches) > _WINDOW:
            del state.batches[0]
        return SequenceCheck.ACCEPT, -1

    def stored(self, producer_id: int, topic: str, partition: int, first_seq: int, base_offset: int) -> None:
        state = self._partitions.get((producer_id, topic, partition))
        if state is None:
            return
        for b in state.batches:
            if b.first_seq == first_seq and b.base_offset < 0:
                b.base_offset = base_offset
                self.dirty = True
                return

    def failed(self, producer_id: int, topic: str, partition: int, first_seq: int) -> None:
        """Withdraw an in-flight batch whose append failed, so its retry is not a duplicate."""
        state = self._partitions.get((producer_id, topic, partition))
        if state is None:
            return
        state.batches = [b for b in state.batches if not (b.first_seq == first_seq and b.base_offset < 0)]
