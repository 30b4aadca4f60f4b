"""Metadata changes carried in the replicated CommitLog: a slave has a topic, group, AMQP
entity or Kafka transaction state its master made as soon as it has the master's log up to
there, not at SlaveSynchronize's next 10 s copy (which copies only topics, groups and
offsets).

A master with an HA port writes the saved changes of its topic table, its
subscription-group table, its AMQP entities (exchanges, queues, bindings: durable ones
only, as RabbitMQ keeps nothing else over a restart) and its Kafka transaction coordinator
(the lines of its log: transactional ids, epochs, open and ended transactions) as records
of the system topic RMQ_SYS_REPLICA_METADATA (JSON ``{kind: [change, ...]}``, kind
"topics", "groups", "amqp" or "txn", each change the table's own record; the changes
queued while a record was being written go together; not in the topic table). A slave
applies each record as its dispatch reaches it (MessageStore.record_listeners) through
the table's ``apply_change``, so the change is durable on the slave and, for topics, its
routes are registered again (the table's listeners). STOMP durable subscriptions are a
subscription group and its offsets (offset_log.py), so they follow with those. The record
is written just after the change is answered, so a message sent to a new topic at once
may precede it in the log by a few records; the slave's ConsumeQueues do not wait for the
topic table. This module never writes on a slave.
"""

from __future__ import annotations

import asyncio
from functools import partial
import logging
from typing import TYPE_CHECKING, Callable, Protocol

import orjson

from rocketport.common.message import Message

from ..errors import BrokerError

if TYPE_CHECKING:
    from ..store.message_store import MessageStore

log = logging.getLogger(__name__)

METADATA_LOG_TOPIC = "RMQ_SYS_REPLICA_METADATA"


class ReplicatedTable(Protocol):
    """A table whose saved changes ride the log: it tells ``listeners`` each batch of
    change records and a slave applies each one with ``apply_change``."""

    listeners: list[Callable[[list[dict]], None]]

    def apply_change(self, change: dict) -> None: ...


class MetadataLog:
    def __init__(self, store: "MessageStore", tables: dict[str, ReplicatedTable],
                 writes: Callable[[], bool]) -> None:
        """``tables``: a record's kind ("topics", "groups", "amqp", "txn") -> its table;
        ``writes``: whether this broker serves slaves now (its HA port is open)."""
        self.store = store
        self.tables = tables
        self.writes = writes
        self._pending: list[tuple[str, list[dict]]] = []
        self._writer: asyncio.Task[None] | None = None
        for kind, table in tables.items():
            table.listeners.append(partial(self.changed, kind))

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
            while self._pending and self._pending[0][0] == kind:  # one record for a run of a kind
                changes = changes + self._pending.pop(0)[1]
            try:
                await self.store.put_message(Message(METADATA_LOG_TOPIC, orjson.dumps({kind: changes}), {}, 0, 0))
            except BrokerError as exc:  # a full disk, a fenced store (topics, groups: the 10 s copy)
                log.warning("%s changes not written to the replicated log: %s", kind, exc)

    def apply(self, body: bytes | memoryview) -> None:
        """Slave: one record's changes into its tables (a record that is not one is logged)."""
        if not self.store.slave:
            return  # a master reading its own log back: its tables are the truth
        try:
            for kind, changes in orjson.loads(bytes(body)).items():
                table = self.tables[kind]
                for change in changes:
                    table.apply_change(change)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("metadata change record not applied: %s", exc)
