"""The coordinator log: every transaction state change as one appended JSON line.

Each line is the whole state of one transactional id after a change (``{"id": ...}``), or
the allocator's next producer id, so replaying keeps the last line per id; lines also carry
the aborted ranges a completed abort produced, which accumulate. An append is one
``write`` of an O_APPEND file: it survives a SIGKILL of the broker at once; under
SYNC_FLUSH the coordinator also awaits `flushed` (an fsync in a worker thread, so the event
loop never waits on the disk) before it answers or acts on the change. When the log has grown past
``compact_after`` lines it is rewritten atomically as a snapshot (one line per id, one of
all aborted ranges still needed). A torn last line (a crash mid-write) is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from typing import Any

import orjson

from ..store.checkpoint import write_atomically

log = logging.getLogger(__name__)

_encode = orjson.dumps  # compact UTF-8 JSON, as bytes


class CoordinatorLog:
    def __init__(self, path: str, *, sync: bool, compact_after: int = 20_000) -> None:
        self.path = path
        self.sync = sync
        self.compact_after = compact_after
        self.lines = 0
        self._fd: int | None = None

    def replay(self) -> list[dict[str, Any]]:
        """Every record, in order (a torn or unreadable line is skipped with a warning)."""
        records = []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return records
        for n, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                records.append(orjson.loads(line))
            except ValueError:
                log.warning("%s: line %d is unreadable (a write cut short); skipped", self.path, n)
        self.lines = len(records)
        return records

    def open(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            self.open()
        os.write(self._fd, _encode(record) + b"\n")
        self.lines += 1

    async def flushed(self) -> None:
        """Under SYNC_FLUSH, once what was appended is on disk (fsync in a worker thread)."""
        fd = self._fd
        if not self.sync or fd is None:
            return
        try:
            await asyncio.to_thread(os.fsync, fd)
        except OSError:  # closed meanwhile by a rewrite, whose snapshot was fsynced itself
            if fd == self._fd:
                raise

    @property
    def wants_compaction(self) -> bool:
        return self.lines > self.compact_after

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the log by ``records`` (a snapshot), atomically."""
        lines = [_encode(r) for r in records]
        self.close()
        write_atomically(self.path, b"\n".join(lines) + b"\n" if lines else b"")
        self.lines = len(lines)
        self.open()
