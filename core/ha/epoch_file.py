"""The store's epoch file (RocketMQ 5's epochFileCheckpoint): which elected masters' logs
this store's CommitLog has followed, as (epoch, start offset) lines, the epoch a group's
election number (core/ha/election.py) and the start offset where that master's own writes
began. A node that comes back compares it with the group's history in etcd: bytes past
the start of the first epoch it never followed are a tail no later master had, and are
cut before it replicates again (`truncate_point`). Written whole and fsynced on each
change (a few lines; changes happen per election)."""

from __future__ import annotations

import os
from dataclasses import dataclass

FILE_NAME = "epoch"


@dataclass(slots=True, frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int
    broker_id: int = -1  # the master of that epoch (-1: not recorded)


class EpochFile:
    def __init__(self, store_root: str) -> None:
        self.path = os.path.join(store_root, FILE_NAME)
        self.entries: list[EpochEntry] = []

    def load(self) -> list[EpochEntry]:
        self.entries = []
        try:
            with open(self.path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 2:
                        self.entries.append(EpochEntry(*(int(p) for p in parts[:3])))
        except FileNotFoundError:
            pass
        return self.entries

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, entry: EpochEntry) -> None:
        """Record that this log follows (or leads) ``entry``'s epoch from now on."""
        if self.entries and entry.epoch <= self.entries[-1].epoch:
            return
        self.entries.append(entry)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(f"{e.epoch} {e.start_offset} {e.broker_id}\n" for e in self.entries)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def truncate_point(local_epoch: int, history: list[EpochEntry], log_end: int) -> int | None:
    """Where a log that last followed ``local_epoch`` must be cut before following the
    group whose elections are ``history``: the start of the first later epoch, when this
    log goes past it (bytes written there by an old master no successor had); None when
    nothing needs cutting."""
    for entry in history:
        if entry.epoch > local_epoch:
            return entry.start_offset if entry.start_offset < log_end else None
    return None
