"""Topic-table changes carried in the replicated CommitLog: a slave has a topic its master
created as soon as it has the master's log up to there, not at SlaveSynchronize's next
10 s copy.

A master with an HA port writes each durable batch of topic changes (TopicConfigManager's
own change records: ``{"put": TopicConfig JSON}`` or ``{"remove": name}``) as one record of
the system topic RMQ_SYS_REPLICA_METADATA (JSON ``{"topics": [...]}``, not in the topic
table). A slave applies each record as its dispatch reaches it (MessageStore.
record_listeners), through its own TopicConfigManager, so the change is durable on the
slave and its routes are registered again (the table's listeners). The record is written
just after the change is answered, so a message sent to a new topic at once may precede it
in the log by a few records; the slave's ConsumeQueues do not wait for the topic table.
SlaveSynchronize still replaces the whole table every 10 s (a slave that was away).
This module never writes on a slave.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

import orjson

from rocketport.common.message import Message

from ..errors import BrokerError
from ..metadata.topics import TopicConfig

if TYPE_CHECKING:
    from ..metadata.topics import TopicConfigManager
    from ..store.message_store import MessageStore

log = logging.getLogger(__name__)

METADATA_LOG_TOPIC = "RMQ_SYS_REPLICA_METADATA"


class MetadataLog:
    def __init__(self, store: "MessageStore", topics: "TopicConfigManager", writes: Callable[[], bool]) -> None:
        """``writes``: whether this broker serves slaves now (its HA port is open)."""
        self.store = store
        self.topics = topics
        self.writes = writes
        self._pending: list[dict] = []
        self._writer: asyncio.Task[None] | None = None

    def changed(self, changes: list[dict]) -> None:
        """The topic table's listener: queue ``changes`` for the log (a master's only)."""
        if self.store.slave or not self.writes():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not serving yet (a table loaded at start): SlaveSynchronize's
            return
        self._pending.extend(changes)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write(), name="ha-metadata-log")

    async def _write(self) -> None:
        while self._pending:
            changes, self._pending = self._pending, []
            try:
                await self.store.put_message(Message(METADATA_LOG_TOPIC, orjson.dumps({"topics": changes}), {}, 0, 0))
            except BrokerError as exc:  # a full disk, a fenced store: the 10 s copy carries them
                log.warning("topic changes not written to the replicated log: %s", exc)
                return

    def apply(self, body: bytes | memoryview) -> None:
        """Slave: one record's topic changes into the table (a record that is not one is logged)."""
        if not self.store.slave:
            return  # a master reading its own log back (recovery): its table is the truth
        try:
            changes = orjson.loads(bytes(body))["topics"]
            for change in changes:
                if "put" in change:
                    self.topics.put(TopicConfig.from_json(change["put"]))
                else:
                    self.topics.remove(str(change["remove"]))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("topic change record not applied: %s", exc)
