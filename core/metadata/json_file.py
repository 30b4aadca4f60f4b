"""Metadata files (topics, groups, offsets): JSON written atomically, with a .bak.

A write goes to a temp file, is fsynced, the current file becomes ``.bak`` and the temp
file takes its name. A load falls back to ``.bak`` when the file is missing or unreadable,
so a crash mid-write never loses the configuration.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

from ..store.checkpoint import write_atomically

log = logging.getLogger(__name__)


class JsonFile:
    def __init__(self, path: str) -> None:
        self.path = path
        # saves run in worker threads and may overlap (a persist loop and a request both
        # saving): one at a time, or one's rename takes the other's temp file away
        self._saving = threading.Lock()

    def load(self) -> Any | None:
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, "rb") as f:
                    return json.loads(f.read())
            except FileNotFoundError:
                continue
            except (ValueError, UnicodeDecodeError) as exc:
                log.error("%s is unreadable (%s); trying the backup", candidate, exc)
        return None

    def size(self) -> int:
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def save(self, data: Any) -> None:
        self.write(json.dumps(data, indent=1, sort_keys=True).encode())

    def write(self, encoded: bytes) -> None:
        """Save a document encoded already (as `save` encodes it: a caller that keeps parts
        of a large table encoded between saves)."""
        with self._saving:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            if os.path.exists(self.path):
                try:
                    os.replace(self.path, self.path + ".bak")
                except OSError:
                    pass
            write_atomically(self.path, encoded)


class ChangeLog:
    """JSON lines appended and fsynced beside a JsonFile: the changes since it was written.
    A torn last line (a crash mid-append) is dropped at read: its change was never
    acknowledged."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.size = 0

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        self.size = len(raw)
        changes = []
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                changes.append(json.loads(line))
            except ValueError:
                log.warning("%s: dropping a torn change (a crash mid-append)", self.path)
                break
        return changes

    def append(self, changes: list[dict]) -> None:
        data = b"".join(json.dumps(c, sort_keys=True).encode() + b"\n" for c in changes)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.size += len(data)

    def clear(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.size = 0
