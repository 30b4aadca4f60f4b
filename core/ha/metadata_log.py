"""Topic and subscription-group changes carried in the replicated CommitLog: a slave has a
topic or group its master created as soon as it has the master's log up to there, not at
SlaveSynchronize's next 10 s copy.

A master with an HA port writes each saved batch of changes of its topic table and of its
subscription-group table (the tables' own change records: ``{"put": config JSON}`` or
``{"remove": name}``) as one record of the system topic RMQ_SYS_REPLICA_METADATA (JSON
``{"topics": [...]}`` or ``{"groups": [...]}``, not in the topic table). A slave applies
each record as its dispatch reaches it (MessageStore.record_listeners), through its own
tables, so the change is durable on the slave and, for topics, its routes are registered
again (the table's listeners). The record is written just after the change is answered, so
a message sent to a new topic at once may precede it in the log by a few records; the
slave's ConsumeQueues do not wait for the topic table. SlaveSynchronize still replaces the
whole tables every 10 s (a slave that was away). This module never writes on a slave.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

import orjson

from rocketport.common.message import Message

from ..errors import BrokerError
from ..metadata.subscription_groups import SubscriptionGroupConfig
from ..metadata.topics import TopicConfig

if TYPE_CHECKING:
    from ..store.message_store import MessageStore

log = logging.getLogger(__name__)

METADATA_LOG_TOPIC = "RMQ_SYS_REPLICA_METADATA"
# a record's key -> how its tables' entries read their JSON
_CONFIGS: dict[str, Any] = {"topics": TopicConfig, "groups": SubscriptionGroupConfig}


class MetadataLog:
    def __init__(self, store: "MessageStore", tables: dict[str, Any], writes: Callable[[], bool]) -> None:
        """``tables``: "topics" and "groups" -> the table (its put, remove and listeners);
        ``writes``: whether this broker serves slaves now (its HA port is open)."""
        self.store = store
        self.tables = tables
        self.writes = writes
        self._pending: list[tuple[str, list[dict]]] = []
        self._writer: asyncio.Task[None] | None = None
        for kind, table in tables.items():
            table.listeners.append(lambda changes, kind=kind: self.changed(kind, changes))

    def changed(self, kind: str, changes: list[dict]) -> None:
        """A table's listener: queue ``changes`` for the log (a master's only)."""
        if self.store.slave or not self.writes():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not serving yet (a table loaded at start): SlaveSynchronize's
            return
        self._pending.append((kind, changes))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write(), name="ha-metadata-log")

    async def _write(self) -> None:
        while self._pending:
            kind, changes = self._pending.pop(0)
            try:
                await self.store.put_message(Message(METADATA_LOG_TOPIC, orjson.dumps({kind: changes}), {}, 0, 0))
            except BrokerError as exc:  # a full disk, a fenced store: the 10 s copy carries them
                log.warning("%s changes not written to the replicated log: %s", kind, exc)

    def apply(self, body: bytes | memoryview) -> None:
        """Slave: one record's changes into its tables (a record that is not one is logged)."""
        if not self.store.slave:
            return  # a master reading its own log back: its tables are the truth
        try:
            for kind, changes in orjson.loads(bytes(body)).items():
                table, config = self.tables[kind], _CONFIGS[kind]
                for change in changes:
                    if "put" in change:
                        table.put(config.from_json(change["put"]))
                    else:
                        table.remove(str(change["remove"]))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("metadata change record not applied: %s", exc)
