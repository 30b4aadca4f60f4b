"""Transactions: what a front-end calls for RocketMQ's transactional messages and for
in-place (Kafka KIP-98) transactions.

A prepared message is put like any other (`put_message` stores it as a half message). The
producer's END_TRANSACTION calls `end_transaction`: commit puts the real message, rollback
drops it, unknown leaves it to the check-back. A front-end that reaches producers adds its
checker at start (`add_transaction_checker`), which the check service asks to question a
producer of the group about a half message, and removes it at stop.

A front-end never writes the half or op topics itself and never resolves a half message
another way (the op record `end_transaction` has written is what ends its checks); a checker
never blocks: it asks a producer and returns whether one was asked. `_put_system` is the
check service's put into those system topics, which bypasses every write rule; nothing else
calls it.

In-place transactions (``core/txn``, docs/semantics.md): `init_transactional_producer`,
`add_partitions_to_txn`, `add_offsets_to_txn`, `txn_offset_commit`, `end_txn` (answered once
logged, then markers to every covered queue and the offsets; with ``bump`` the epoch moves
on at every end),
`check_transactional_write` (before a producer's transactional batch is stored), `last_stable_offset` / `aborted_transactions` (what a Kafka
read_committed fetch reports), `has_pending_txn_offsets`, `transactions_matching` /
`transaction` (admin). A front-end never writes a marker itself. Idempotent producers
(``core/txn/producer_state.py``, state derived from the stored batches): `allocate_producer_id`,
`check_sequence` (before a producer's batch is stored).
"""

from __future__ import annotations

import logging

from rocketport.common.message import PROPERTY_PRODUCER_GROUP, Message

from ..errors import MessageNotFound, TopicNotFound, TransactionMismatch
from ..half_messages import TransactionChecker, TransactionCheckService, committed_message, is_half
from ..metadata.topics import TopicConfigManager
from ..store.message_store import MessageStore, PutResult
from ..txn.coordinator import TxnCoordinator, TxnMetadata
from ..txn.producer_state import ProducerStateTable, SequenceCheck
from ..txn.visibility import AbortedRange
from .produce import ProduceRole

# the facade's log lines keep the logger name they have always had, whichever role writes them
log = logging.getLogger("rocketport.core.broker")


class TransactionRole(ProduceRole):
    """The transaction calls of `core.broker.Broker` (see the module docstring). State is
    the Broker's, set up in its constructor; calls `put_message` of the produce role."""

    store: MessageStore
    topics: TopicConfigManager
    transactions: TransactionCheckService
    txn: TxnCoordinator
    producer_states: ProducerStateTable

    def add_transaction_checker(self, checker: TransactionChecker) -> None:
        """One more who answers check-backs (each front-end with producers adds its own):
        ``checker(producer_group, half) -> bool`` must ask a producer of the group without
        blocking and return whether one was asked; checkers are tried in order."""
        self.transactions.checkers.append(checker)

    def remove_transaction_checker(self, checker: TransactionChecker) -> None:
        if checker in self.transactions.checkers:
            self.transactions.checkers.remove(checker)

    async def end_transaction(self, producer_group: str, commit_log_offset: int,
                              commit: bool | None, *, from_check: bool = False) -> PutResult | None:
        """END_TRANSACTION for the half message at ``commit_log_offset``: True commits
        (the real message is put and returned), False rolls back, None (unknown) leaves it
        to the check-back. ``from_check`` only tells the log who answered."""
        half = self.store.message_at(commit_log_offset)
        if half is None or not is_half(half):
            raise MessageNotFound(f"no half message at commit-log offset {commit_log_offset}")
        owner = half.properties.get(PROPERTY_PRODUCER_GROUP)
        if owner and producer_group and owner != producer_group:
            raise TransactionMismatch(
                f"half message {commit_log_offset} belongs to producer group {owner!r}, "
                f"not {producer_group!r}")
        if commit is None:
            log.debug("transaction %d unknown (from check: %s)", commit_log_offset, from_check)
            return None
        result = await self.put_message(committed_message(half)) if commit else None
        await self.transactions.resolve(half)
        return result

    # ---------------------------------------------------------------- internals
    async def _put_system(self, msg: Message) -> PutResult:
        """A put into a system topic (op records, half copies): no routing, no topic config
        (system topics live in the store only, as clients never route to them)."""
        return await self.store.put_message(msg)

    # ---------------------------------------------------------------- in-place transactions
    async def init_transactional_producer(self, transactional_id: str, timeout_ms: int,
                                          producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch) for ``transactional_id``: a new id, or the known one's next
        epoch, its older producer fenced and its open transaction aborted first."""
        return await self.txn.init_producer(transactional_id, timeout_ms, producer_id, producer_epoch)

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              queues: list[tuple[str, int]]) -> None:
        await self.txn.add_partitions(transactional_id, producer_id, producer_epoch, queues)

    async def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group: str) -> None:
        await self.txn.add_offsets(transactional_id, producer_id, producer_epoch, group)

    async def txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str,
                          offsets: list[tuple[str, int, int, str | None]]) -> None:
        """Offsets (topic, queue id, offset, metadata) committed when the transaction commits."""
        await self.txn.txn_offset_commit(transactional_id, producer_id, producer_epoch, group, offsets)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, bump: bool = False) -> tuple[int, int]:
        """The producer id and epoch the next transaction runs under: ``bump`` (Kafka's
        transaction protocol v2) moves the epoch on at every end."""
        return await self.txn.end_txn(transactional_id, producer_id, producer_epoch, commit, bump)

    async def allocate_producer_id(self) -> int:
        """A new idempotent producer id (never one handed out before, even across a crash)."""
        return await self.producer_states.allocate_producer_id()

    def check_sequence(self, producer_id: int, producer_epoch: int, topic: str, queue_id: int,
                       first_seq: int, count: int) -> tuple[SequenceCheck, int]:
        """An idempotent producer's batch, before it is stored: accepted, a duplicate (with
        the base offset it was stored at), out of order, or of a fenced epoch. The table is
        derived from the stored batches, so the answer is the same after a crash."""
        return self.producer_states.check(producer_id, producer_epoch, topic, queue_id, first_seq, count)

    def check_transactional_write(self, producer_id: int, producer_epoch: int, topic: str,
                                  queue_id: int) -> None:
        """Before a transactional batch is stored: the producer is current and its open
        transaction covers the queue (ProducerFenced, InvalidTxnState ... otherwise)."""
        self.txn.before_write(producer_id, producer_epoch, topic, queue_id)

    def last_stable_offset(self, topic: str, queue_id: int, max_offset: int | None = None) -> int:
        """The queue's LSO (its max offset when no transaction is open on it); a caller that
        has just read the max offset passes it."""
        state = self.txn.queues.get((topic, queue_id))
        if max_offset is None:
            max_offset = self.store.max_offset(topic, queue_id)
        return max_offset if state is None else state.lso(max_offset)

    def aborted_transactions(self, topic: str, queue_id: int, start: int, end: int) -> list[AbortedRange]:
        """Aborted ranges overlapping [start, end) of the queue (a read_committed fetch's)."""
        state = self.txn.queues.get((topic, queue_id))
        return [] if state is None else state.aborted_between(start, end)

    def has_pending_txn_offsets(self, group: str, topic: str, queue_id: int) -> bool:
        return self.txn.has_pending_offsets(group, topic, queue_id)

    def transactions_matching(self, states: list[str], producer_ids: list[int],
                              min_duration_ms: int = -1) -> list[TxnMetadata]:
        return self.txn.matching(states, producer_ids, min_duration_ms)

    def transaction(self, transactional_id: str) -> TxnMetadata | None:
        return self.txn.transactions.get(transactional_id)

    async def _put_markers(self, queues: list[tuple[str, int]], batch: bytes,
                           timestamp: int) -> list[int | TopicNotFound]:
        """The coordinator's marker puts: its control batch stored in every queue like a
        producer's batch (whatever the topic's perm: a transaction must end), in one write;
        the offset each got, or TopicNotFound for a queue whose topic was deleted since."""
        gone = [self.topics.get(topic) is None for topic, _ in queues]
        offsets = iter(await self.store.put_control_batch(
            [queue for queue, deleted in zip(queues, gone) if not deleted], batch, timestamp))
        return [TopicNotFound(topic) if deleted else next(offsets) for (topic, _), deleted in zip(queues, gone)]
