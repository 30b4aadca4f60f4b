"""The typed errors of the transaction coordinator; each front-end maps them to its codes."""

from __future__ import annotations

from ..errors import BrokerError


class TransactionError(BrokerError):
    """A transactional request the coordinator refuses."""


class ProducerFenced(TransactionError):
    """The producer's epoch is older than the transactional id's: a newer incarnation
    (or the coordinator's timeout abort) fenced it."""


class InvalidProducerIdMapping(TransactionError):
    """The transactional id is unknown or belongs to another producer id."""


class InvalidTxnState(TransactionError):
    """The request does not fit the transaction's state (EndTxn with nothing open, a
    transactional write to a partition the transaction did not add...)."""


class ConcurrentTransactions(TransactionError):
    """The transaction is being completed (its markers are being written): retry."""


class InvalidTransactionTimeout(TransactionError):
    """transaction.timeout.ms is not in (0, transaction.max.timeout.ms]."""
