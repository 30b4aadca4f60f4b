"""Consumer offsets carried in the replicated CommitLog: the ordered channel a slave's
offsets ride on between SlaveSynchronize's 10 s copies.

The master writes what changed in its offset table since the last record as one record of
the system topic RMQ_SYS_REPLICA_OFFSETS (JSON: ``{"topic@group": {"queue": offset}}``, or
``{"topic@group": null}`` for offsets the master forgot: a deleted group or topic, a STOMP
durable subscription removed)
every ``interval`` while it has an HA port, and at once when a commit must be answered
only once replicated (`flush`, used by the facade's offsets_durable under SYNC_MASTER).
The slave applies each such record as its dispatch reaches it (MessageStore.record_listeners),
so its offsets follow the log's order: a slave that has a message's record has every
offset committed before it was written. The delay levels' progress (RocketMQ's
delayOffset.json, which the schedule service advances as it delivers) rides the same records
under the key ``delayOffsets`` (a key without ``@``: never a topic@group), so a promoted
slave does not deliver again what its master delivered (a slave writes them on the master's
cadence, flushDelayOffsetInterval, as the schedule service's persister runs in every role).
This module never reads the table of a slave as its own truth: the master's is
(SlaveSynchronize still replaces it every 10 s).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from rocketport.common.message import Message

if TYPE_CHECKING:
    from ..metadata.offsets import ConsumerOffsetManager
    from ..schedule import DelayOffsets
    from ..store.message_store import MessageStore

log = logging.getLogger(__name__)

OFFSET_LOG_TOPIC = "RMQ_SYS_REPLICA_OFFSETS"
DELAY_KEY = "delayOffsets"


class OffsetLog:
    def __init__(self, store: "MessageStore", offsets: "ConsumerOffsetManager") -> None:
        self.store = store
        self.offsets = offsets
        self._sent: dict[str, dict[int, int]] = {}
        self._sent_version = -1
        self.delay_offsets: "DelayOffsets | None" = None  # the broker's, once made
        self._sent_delay: dict[int, int] = {}

    async def flush(self) -> int:
        """Write the offsets changed since the last record (none: nothing written); the log
        offset past which every commit made before this call is in the log."""
        offsets = self.offsets
        delay = self.delay_offsets.table if self.delay_offsets is not None else self._sent_delay
        if offsets.version == self._sent_version and delay == self._sent_delay:
            return self.store.commitlog.max_offset
        changed: dict[str, dict[str, int] | None] = {}
        if offsets.version != self._sent_version:
            version = offsets.version
            for key, queues in offsets.table.items():
                sent = self._sent.get(key, {})
                delta = {str(q): o for q, o in queues.items() if sent.get(q) != o}
                if delta:
                    changed[key] = delta
            changed.update(dict.fromkeys(self._sent.keys() - offsets.table.keys()))  # forgotten
            self._sent = {key: dict(queues) for key, queues in offsets.table.items()}
            self._sent_version = version
        delay_delta = {str(level): o for level, o in delay.items() if self._sent_delay.get(level) != o}
        if delay_delta:
            changed[DELAY_KEY] = delay_delta
            self._sent_delay = dict(delay)
        if not changed:
            return self.store.commitlog.max_offset
        result = await self.store.put_message(Message(OFFSET_LOG_TOPIC, orjson.dumps(changed), {}, 0, 0))
        return result.commit_log_offset + result.wrote_bytes

    def apply(self, body: bytes | memoryview) -> None:
        """Slave: one record's offsets into the table (a record that is not one is logged)."""
        try:
            changed = orjson.loads(bytes(body))
            delay = changed.pop(DELAY_KEY, None)
            if delay is not None and self.delay_offsets is not None:
                for level, o in delay.items():
                    self.delay_offsets.table[int(level)] = int(o)
            for key, queues in changed.items():
                if queues is None:
                    self.offsets.table.pop(str(key), None)
                    continue
                table = self.offsets.table.setdefault(str(key), {})
                for q, o in queues.items():
                    table[int(q)] = int(o)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("offset log record not applied: %s", exc)
            return
        self.offsets.version += 1
