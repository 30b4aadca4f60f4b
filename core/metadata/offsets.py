"""Consumer offsets for every protocol's groups (RocketMQ's ConsumerOffsetManager).

``topic@group -> {queueId: offset}``, persisted in config/consumerOffset.json every
flushConsumerOffsetInterval and at shutdown. Commits are in memory first (as RocketMQ), so
a crash can replay at most one interval: consumers are at-least-once. A caller whose client
was promised more (Kafka answers an OffsetCommit once its __consumer_offsets write is done)
awaits `durable`: the commits made before it are on disk when it returns, and the callers
that wait meanwhile share one save.

Every Kafka OffsetCommit waits for a save of the whole table, so a save must not cost a
JSON encoding of every queue: each topic@group's part of the file is kept encoded with a
copy of the offsets it was encoded from, and only parts whose offsets differ (however they
changed: commits, a slave applying its master's table) are encoded again. At 100,000
queues that made a commit's save the broker's largest cost.

A commit may carry a metadata string (Kafka's OffsetCommit ``metadata``); it is kept beside
the offset in ``metadataTable`` (same keys), so the file's ``offsetTable`` stays RocketMQ's
format, and a commit without metadata clears the queue's earlier one.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import dataclass

from .json_file import JsonFile

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "consumerOffset.json"))
        self.table: dict[str, dict[int, int]] = {}
        self.metadata: dict[str, dict[int, str]] = {}
        # per topic@group, how far its commits moved forward since start-up (messages
        # consumed, for the traffic stats); a queue's first commit is its starting point
        self.consumed: dict[str, int] = {}
        self.version = 0  # changes made so far
        self._saved_version = 0  # changes the file holds
        self._saving: asyncio.Lock | None = None  # created on the loop that saves
        self._writing = threading.Lock()  # a write from a worker thread or the loop
        # topic@group -> (a copy of its offsets, its part of the file encoded from them)
        self._encoded: dict[str, tuple[dict[int, int], str]] = {}

    def load(self) -> None:
        data = self.file.load() or {}
        for key, queues in data.get("offsetTable", {}).items():
            self.table[key] = {int(q): int(o) for q, o in queues.items()}
        for key, queues in data.get("metadataTable", {}).items():
            self.metadata[key] = {int(q): str(m) for q, m in queues.items()}

    def persist(self) -> None:
        """Write the table now (blocking: temp file, fsync, rename)."""
        self._write(self.version, self.snapshot())

    def _write(self, version: int, snapshot: Snapshot) -> None:
        """Write ``snapshot`` (the table at ``version``) unless a newer one is on disk: a
        worker thread's save that took its snapshot first never lands over a later one."""
        with self._writing:
            if version > self._saved_version:
                self.file.write(render(snapshot))
                self._saved_version = version

    async def save(self) -> None:
        """Write the table (in a worker thread) unless the file holds every change already;
        one save at a time. OSError when the file cannot be written."""
        if self._saving is None:
            self._saving = asyncio.Lock()
        async with self._saving:
            version = self.version
            if self._saved_version >= version:
                return
            await asyncio.to_thread(self._write, version, self.snapshot())

    async def durable(self) -> None:
        """Return once every change made before this call is on disk (a save waiting
        behind another one finds the file already holding its changes, or writes them)."""
        version = self.version
        while self._saved_version < version:
            await self.save()

    def snapshot(self) -> Snapshot:
        """What to persist from a worker thread while the loop goes on committing: each
        topic@group's encoded part (encoded again only where its offsets changed since the
        last snapshot) and the commit metadata."""
        cache, encoded, parts = self._encoded, {}, {}
        for key, queues in self.table.items():
            known = cache.get(key)
            if known is None or known[0] != queues:
                known = (dict(queues), _encode_part(key, queues))
            encoded[key] = known
            parts[key] = known[1]
        self._encoded = encoded  # (a topic@group gone from the table is gone from it)
        metadata = {k: {str(q): m for q, m in v.items()} for k, v in self.metadata.items() if v}
        return Snapshot(parts, metadata)

    def commit(self, group: str, topic: str, queue_id: int, offset: int,
               metadata: str | None = None) -> None:
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        queues = self.table.setdefault(key, {})
        before = queues.get(queue_id)
        if before is not None and offset > before:
            self.consumed[key] = self.consumed.get(key, 0) + offset - before
        queues[queue_id] = offset
        if metadata:
            self.metadata.setdefault(key, {})[queue_id] = metadata
        elif key in self.metadata:
            self.metadata[key].pop(queue_id, None)
        self.version += 1

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if the group never committed for this queue."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def query_metadata(self, group: str, topic: str, queue_id: int) -> str:
        """The metadata committed with the offset ("" when none was)."""
        return self.metadata.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, "")

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def groups_of(self, topic: str) -> set[str]:
        return {k.split(TOPIC_GROUP_SEPARATOR, 1)[1] for k in self.table
                if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic}

    def topics_of(self, group: str) -> set[str]:
        return {k.split(TOPIC_GROUP_SEPARATOR, 1)[0] for k in self.table
                if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group}

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic]:
            del self.table[key]
            self.metadata.pop(key, None)
            self.consumed.pop(key, None)
            self.version += 1

    def remove_group(self, group: str) -> None:
        for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group]:
            del self.table[key]
            self.metadata.pop(key, None)
            self.consumed.pop(key, None)
            self.version += 1


@dataclass(slots=True)
class Snapshot:
    """The offsets file's content at one version: the encoded lines of ``offsetTable`` by
    topic@group, and ``metadataTable`` (Kafka commit metadata; only Kafka commits carry any,
    so a RocketMQ broker's file stays as RocketMQ writes it)."""

    parts: dict[str, str]
    metadata: dict[str, dict[str, str]]


def _encode_part(key: str, queues: dict[int, int]) -> str:
    """One topic@group's line and offsets as they appear inside ``offsetTable``."""
    inner = json.dumps({str(q): o for q, o in queues.items()}, indent=1, sort_keys=True).replace("\n", "\n  ")
    return f"  {json.dumps(key)}: {inner}"


def render(snapshot: Snapshot) -> bytes:
    """The file: what ``json.dumps(..., indent=1, sort_keys=True)`` makes of the table."""
    fields = []
    if snapshot.metadata:
        fields.append(' "metadataTable": ' + json.dumps(snapshot.metadata, indent=1, sort_keys=True).replace("\n", "\n "))
    parts = snapshot.parts
    table = ",\n".join([parts[key] for key in sorted(parts)])
    fields.append(' "offsetTable": ' + ("{\n" + table + "\n }" if parts else "{}"))
    return ("{\n" + ",\n".join(fields) + "\n}").encode()
