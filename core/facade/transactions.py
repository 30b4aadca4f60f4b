"""Transactions: what a front-end calls for RocketMQ's transactional messages.

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
"""

from __future__ import annotations

import logging

from ..errors import MessageNotFound, TransactionMismatch
from ..message import PROPERTY_PRODUCER_GROUP, Message
from ..store.message_store import MessageStore, PutResult
from ..transaction import TransactionChecker, TransactionCheckService, committed_message, is_half

# the facade's log lines keep the logger name they have always had, whichever role writes them
log = logging.getLogger("rocketport.core.broker")


class TransactionRole:
    """The transaction calls of `core.broker.Broker` (see the module docstring). State is
    the Broker's, set up in its constructor; calls `put_message` of the produce role."""

    store: MessageStore
    transactions: TransactionCheckService

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
