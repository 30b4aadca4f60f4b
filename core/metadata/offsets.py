"""Consumer offsets for every protocol's groups (RocketMQ's ConsumerOffsetManager).

``topic@group -> {queueId: offset}``, persisted in config/consumerOffset.json every
flushConsumerOffsetInterval and at shutdown. Commits are in memory first (as RocketMQ), so
a crash can replay at most one interval: consumers are at-least-once.
"""

from __future__ import annotations

import os

from .json_file import JsonFile

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "consumerOffset.json"))
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def load(self) -> None:
        data = self.file.load() or {}
        for key, queues in data.get("offsetTable", {}).items():
            self.table[key] = {int(q): int(o) for q, o in queues.items()}

    def persist(self) -> None:
        self.file.save(self.snapshot())

    def snapshot(self) -> dict:
        """A copy to persist from a worker thread while the loop goes on committing."""
        self.dirty = False
        return {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset
        self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if the group never committed for this queue."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

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
            self.dirty = True

    def remove_group(self, group: str) -> None:
        for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group]:
            del self.table[key]
            self.dirty = True
