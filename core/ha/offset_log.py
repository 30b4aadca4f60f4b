"""Consumer offsets carried in the replicated CommitLog: the ordered channel a slave's
offsets ride on between SlaveSynchronize's 10 s copies.

The master writes what changed in its offset table since the last record as one record of
the system topic RMQ_SYS_REPLICA_OFFSETS (JSON: ``{"topic@group": {"queue": offset}}``)
every ``interval`` while it has an HA port, and at once when a commit must be answered
only once replicated (`flush`, used by the facade's offsets_durable under SYNC_MASTER).
The slave applies each such record as its dispatch reaches it (MessageStore.record_listeners),
so its offsets follow the log's order: a slave that has a message's record has every
offset committed before it was written. This module never reads the table of a slave as
its own truth: the master's is (SlaveSynchronize still replaces it every 10 s).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from rocketport.common.message import Message

if TYPE_CHECKING:
    from ..metadata.offsets import ConsumerOffsetManager
    from ..store.message_store import MessageStore

log = logging.getLogger(__name__)

OFFSET_LOG_TOPIC = "RMQ_SYS_REPLICA_OFFSETS"


class OffsetLog:
    def __init__(self, store: "MessageStore", offsets: "ConsumerOffsetManager") -> None:
        self.store = store
        self.offsets = offsets
        self._sent: dict[str, dict[int, int]] = {}
        self._sent_version = -1

    async def flush(self) -> int:
        """Write the offsets changed since the last record (none: nothing written); the log
        offset past which every commit made before this call is in the log."""
        offsets = self.offsets
        if offsets.version == self._sent_version:
            return self.store.commitlog.max_offset
        version = offsets.version
        changed: dict[str, dict[str, int]] = {}
        for key, queues in offsets.table.items():
            sent = self._sent.get(key, {})
            delta = {str(q): o for q, o in queues.items() if sent.get(q) != o}
            if delta:
                changed[key] = delta
        self._sent = {key: dict(queues) for key, queues in offsets.table.items()}
        self._sent_version = version
        if not changed:
            return self.store.commitlog.max_offset
        result = await self.store.put_message(Message(OFFSET_LOG_TOPIC, orjson.dumps(changed), {}, 0, 0))
        return result.commit_log_offset + result.wrote_bytes

    def apply(self, body: bytes | memoryview) -> None:
        """Slave: one record's offsets into the table (a record that is not one is logged)."""
        try:
            changed = orjson.loads(bytes(body))
            for key, queues in changed.items():
                table = self.offsets.table.setdefault(str(key), {})
                for q, o in queues.items():
                    table[int(q)] = int(o)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("offset log record not applied: %s", exc)
            return
        self.offsets.version += 1
