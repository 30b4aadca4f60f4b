"""The transaction coordinator of in-place (Kafka KIP-98) transactions.

It owns every transactional id's state (`TxnMetadata`), the per-queue read rule's state
(`QueueTxnState`, see visibility.py), the timeout of open transactions and the markers that
end them; its changes are appended to the coordinator log (log.py) before they are acted
on, so a restart (even after SIGKILL) replays them: open transactions reopen (and their
timeout runs on), transactions killed between EndTxn and their markers are completed. The
states and records are docs/semantics.md's "Transactions that write in place".

It writes only markers, through the ``put_markers`` it is given (the Broker's put path), and
commits a transaction's offsets through ``commit_offset``; it never reads messages. Each
appended line is told to ``listeners`` too: a master's replicated log carries them to its
slaves (core/ha/metadata_log.py), whose coordinator logs and replays them (`apply_change`),
so a promoted slave knows every transactional id, epoch and open transaction.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import struct
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from rocketport.common.batch import Record, build_batch

from ..errors import BrokerError, TopicNotFound
from ..periodic import run_every
from ..schedule import now_ms
from .errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)
from .log import CoordinatorLog
from .visibility import AbortedRange, QueueTxnState

log = logging.getLogger(__name__)

MAX_TIMEOUT_MS: Final = 900_000  # Kafka's transaction.max.timeout.ms default (transactionMaxTimeoutMs)
FIRST_PRODUCER_ID: Final = 1 << 32  # transactional producer ids, apart from idempotent ones
_MAX_EPOCH: Final = 32766  # past it the id gets a new producer id (epoch 32767 is reserved)

Queue = tuple[str, int]
# (queues, control batch, its timestamp) -> each queue's marker offset, or TopicNotFound for a
# queue whose topic was deleted; any other refusal (a full disk) is raised for them all
PutMarkers = Callable[[list[Queue], bytes, int], Awaitable[list[int | TopicNotFound]]]

# a control record: key = version 0 and type (0 abort, 1 commit), value = version 0 and
# the coordinator epoch (one coordinator here: 0), as Kafka writes its markers
_MARKER_KEYS: Final = {commit: struct.pack(">hh", 0, int(commit)) for commit in (False, True)}
_MARKER_VALUE: Final = struct.pack(">hi", 0, 0)


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_PREPARING: Final = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    start_ms: int = -1
    # queue -> the transaction's first offset there (the queue's max offset when it was
    # added, then when its first transactional batch was stored: never above the batch)
    partitions: dict[Queue, int] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    # (group, topic, queue) -> (offset, metadata), committed when the transaction commits
    offsets: dict[tuple[str, str, int], tuple[int, str | None]] = field(default_factory=dict)
    written: set[Queue] = field(default_factory=set)  # queues holding the LSO for it
    # the producer id and epoch the last ended transaction ran under, when its end bumped
    # the epoch (a v2 EndTxn, a timeout): a v2 producer's retried EndTxn carries them
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # the markers of an answered EndTxn being written (see TxnCoordinator.end_txn)
    completion: asyncio.Task | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.transactional_id, "pid": self.producer_id, "epoch": self.producer_epoch,
                "timeout": self.timeout_ms, "state": self.state.value, "start": self.start_ms,
                "parts": [[t, q, o] for (t, q), o in self.partitions.items()],
                "groups": sorted(self.groups),
                "offsets": [[g, t, q, o, m] for (g, t, q), (o, m) in self.offsets.items()],
                "last": [self.last_producer_id, self.last_producer_epoch]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TxnMetadata":
        last_pid, last_epoch = d.get("last", (-1, -1))  # absent from lines of older logs
        return cls(d["id"], int(d["pid"]), int(d["epoch"]), int(d["timeout"]), TxnState(d["state"]),
                   int(d["start"]), {(t, int(q)): int(o) for t, q, o in d["parts"]},
                   set(d["groups"]), {(g, t, int(q)): (int(o), m) for g, t, q, o, m in d["offsets"]},
                   last_producer_id=int(last_pid), last_producer_epoch=int(last_epoch))


class TxnCoordinator:
    """Every transactional id of this broker (it coordinates all of them)."""

    def __init__(self, config_dir: str, *, put_markers: PutMarkers, max_offset: Callable[[str, int], int],
                 min_offset: Callable[[str, int], int],
                 commit_offset: Callable[[str, str, int, int, str | None], None],
                 offsets_durable: Callable[[], Awaitable[None]],
                 notify: Callable[[str, int, int], None], sync: bool,
                 max_timeout_ms: int = MAX_TIMEOUT_MS, check_interval_ms: int = 1000,
                 clock: Callable[[], int] = now_ms) -> None:
        self.log = CoordinatorLog(os.path.join(config_dir, "transactions.log"), sync=sync)
        self._put_markers = put_markers
        self._max_offset = max_offset
        self._min_offset = min_offset
        self._commit_offset = commit_offset
        self._offsets_durable = offsets_durable
        self._notify = notify
        self.max_timeout_ms = max_timeout_ms
        self.check_interval_ms = check_interval_ms
        self._clock = clock
        self.transactions: dict[str, TxnMetadata] = {}
        self._by_pid: dict[int, TxnMetadata] = {}
        self.queues: dict[Queue, QueueTxnState] = {}  # the read rule's state, by queue
        self.next_producer_id = FIRST_PRODUCER_ID
        self._stop = asyncio.Event()
        self._completing: set[asyncio.Task] = set()
        self.listeners: list[Callable[[list[dict[str, Any]]], None]] = []  # told each line (replication)

    # ------------------------------------------------------------------ recovery
    def load(self) -> None:
        """Replay the coordinator log: ids, aborted ranges, and open transactions' first
        offsets back in the read rule (so their records stay invisible)."""
        for record in self.log.replay():
            self._replay(record)
        for meta in self.transactions.values():
            self._take_up(meta)
        self.log.open()

    def _replay(self, record: dict[str, Any]) -> TxnMetadata | None:
        """One logged line into the tables; the id's state it carries, if any."""
        if "next_pid" in record:
            self.next_producer_id = max(self.next_producer_id, int(record["next_pid"]))
        # queues that hold markers: their readers skip them, even when nothing is open
        for t, q in record.get("ended", ()):
            self._queue(t, int(q))
        for t, q, pid, first, last in record.get("aborted", ()):
            self._queue(t, int(q)).aborted.append(AbortedRange(int(pid), int(first), int(last)))
        if "forget_topic" in record:  # deleted: a new topic of that name starts afresh
            self._forget(record["forget_topic"])
        if "id" not in record:
            return None
        meta = TxnMetadata.from_json(record)
        self.transactions[meta.transactional_id] = meta
        return meta

    def _take_up(self, meta: TxnMetadata) -> None:
        self._by_pid[meta.producer_id] = meta
        if meta.state is TxnState.ONGOING or meta.state in _PREPARING:
            # every added queue may hold its records: each holds the LSO from its bound
            meta.written = set(meta.partitions)
            for (t, q), first in meta.partitions.items():
                self._queue(t, q).open[meta.producer_id] = first

    def apply_change(self, record: dict[str, Any]) -> None:
        """Slave: one line its master's coordinator logged, logged here and replayed (an
        ended transaction's queues no longer held open by it)."""
        self.log.append(record)
        meta = self._replay(record)
        if meta is not None:
            old = self._by_pid.get(meta.producer_id)
            for t, q in (old.partitions if old is not None else ()):
                self._queue(t, q).open.pop(meta.producer_id, None)
            for t, q in record.get("ended", ()):
                self._queue(t, int(q)).open.pop(meta.producer_id, None)
            self._take_up(meta)
        if self.log.wants_compaction:
            self._compact()

    async def recover(self) -> None:
        """Complete the transactions a crash left between EndTxn and their markers."""
        for meta in list(self.transactions.values()):
            if meta.state in _PREPARING:
                log.info("completing transaction %r (%s) left by the last run", meta.transactional_id,
                         meta.state.value)
                async with meta.lock:
                    try:
                        await self._complete(meta)
                    except BrokerError as exc:  # left prepared: the id's next request tries again
                        log.warning("the markers of %r are not written: %s", meta.transactional_id, exc)

    # ------------------------------------------------------------------ producer ids
    async def init_producer(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                            producer_epoch: int = -1) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch). A known id's epoch
        is bumped (fencing every older incarnation) after its open transaction is aborted."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidTransactionTimeout(
                f"transaction.timeout.ms {timeout_ms} is not in (0, {self.max_timeout_ms}]")
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self._allocate(), 0, timeout_ms)
            self.transactions[transactional_id] = meta
            self._by_pid[meta.producer_id] = meta
            await self._saved(meta, next_pid=self.next_producer_id)
            return meta.producer_id, meta.producer_epoch
        async with meta.lock:
            if producer_id >= 0 and (producer_id, producer_epoch) != (meta.producer_id, meta.producer_epoch):
                raise ProducerFenced(f"producer {producer_id} epoch {producer_epoch} is not the current "
                                     f"one of {transactional_id!r}")
            if meta.state in _PREPARING:
                await self._complete(meta)
            if meta.state is TxnState.ONGOING:  # the older producer's transaction: abort it
                self._fence(meta)
                meta.state = TxnState.PREPARE_ABORT
                await self._saved(meta)
                await self._complete(meta)
            self._bump(meta)
            meta.timeout_ms = timeout_ms
            meta.state = TxnState.EMPTY
            await self._saved(meta, next_pid=self.next_producer_id)
            return meta.producer_id, meta.producer_epoch

    def _allocate(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    @staticmethod
    def _fence(meta: TxnMetadata) -> None:
        """A new epoch for the same producer id, so the markers of the abort that follows
        cover its records (an exhausted epoch stays: the next InitProducerId moves on)."""
        if meta.producer_epoch < _MAX_EPOCH:
            meta.producer_epoch += 1

    def _bump(self, meta: TxnMetadata) -> None:
        """The next epoch, or a new producer id at epoch 0 once the epochs are used up."""
        if meta.producer_epoch >= _MAX_EPOCH:
            del self._by_pid[meta.producer_id]
            meta.producer_id, meta.producer_epoch = self._allocate(), 0
            self._by_pid[meta.producer_id] = meta
        else:
            meta.producer_epoch += 1

    # ------------------------------------------------------------------ what a transaction covers
    async def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        """`_checked`, once the markers of the id's answered EndTxn are written: the next
        transaction's requests may come before them, and wait for them here."""
        meta = self.transactions.get(transactional_id)
        if meta is not None:
            await self._written(meta)
        return self._checked(transactional_id, producer_id, producer_epoch)

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMapping(f"{transactional_id!r} is not producer {producer_id}")
        if producer_epoch != meta.producer_epoch:
            raise ProducerFenced(f"epoch {producer_epoch} of {transactional_id!r} is fenced "
                                 f"(current {meta.producer_epoch})")
        if meta.state in _PREPARING or meta.lock.locked():
            raise ConcurrentTransactions(f"{transactional_id!r} is completing its transaction")
        return meta

    def _begin(self, meta: TxnMetadata) -> None:
        if meta.state is not TxnState.ONGOING:
            meta.state = TxnState.ONGOING
            meta.start_ms = self._clock()

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             queues: list[Queue]) -> None:
        """AddPartitionsToTxn: the transaction will write to ``queues`` (which exist)."""
        meta = await self._current(transactional_id, producer_id, producer_epoch)
        new = [q for q in queues if q not in meta.partitions]
        if not new and meta.state is TxnState.ONGOING:
            return
        self._begin(meta)
        for topic, queue_id in new:
            meta.partitions[(topic, queue_id)] = self._max_offset(topic, queue_id)
        await self._saved(meta)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group: str) -> None:
        """AddOffsetsToTxn: the transaction will commit offsets of ``group``."""
        meta = await self._current(transactional_id, producer_id, producer_epoch)
        if group in meta.groups and meta.state is TxnState.ONGOING:
            return
        self._begin(meta)
        meta.groups.add(group)
        await self._saved(meta)

    async def txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                group: str, offsets: list[tuple[str, int, int, str | None]]) -> None:
        """TxnOffsetCommit: offsets committed for ``group`` when the transaction commits."""
        meta = await self._current(transactional_id, producer_id, producer_epoch)
        if meta.state is not TxnState.ONGOING or group not in meta.groups:
            raise InvalidTxnState(f"{transactional_id!r} did not add group {group!r} (AddOffsetsToTxn)")
        for topic, queue_id, offset, metadata in offsets:
            meta.offsets[(group, topic, queue_id)] = (offset, metadata)
        await self._saved(meta)

    def has_pending_offsets(self, group: str, topic: str, queue_id: int) -> bool:
        """Whether an unfinished transaction will commit an offset of this group and queue
        (Kafka's OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        key = (group, topic, queue_id)
        return any(key in m.offsets for m in self.transactions.values()
                   if m.state is TxnState.ONGOING or m.state in _PREPARING)

    # ------------------------------------------------------------------ writes
    def before_write(self, producer_id: int, producer_epoch: int, topic: str, queue_id: int) -> None:
        """A transactional batch is about to be stored: the producer must be current and
        its transaction must cover the queue. The queue's LSO is held from here (at the
        queue's max offset, which the batch's offset cannot be below)."""
        meta = self._by_pid.get(producer_id)
        if meta is None:
            raise InvalidProducerIdMapping(f"producer {producer_id} has no transactional id")
        if producer_epoch != meta.producer_epoch:
            raise ProducerFenced(f"producer {producer_id} epoch {producer_epoch} is fenced")
        key = (topic, queue_id)
        if meta.state is not TxnState.ONGOING or key not in meta.partitions:
            raise InvalidTxnState(f"{meta.transactional_id!r} did not add {topic}-{queue_id}")
        if key in meta.written:
            return
        # not logged: after a crash the bound logged by add_partitions (never above this) holds
        first = self._max_offset(topic, queue_id)
        meta.partitions[key] = first
        meta.written.add(key)
        self._queue(topic, queue_id).open[producer_id] = first

    # ------------------------------------------------------------------ the end
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, bump: bool = False) -> tuple[int, int]:
        """EndTxn: answered once its prepare line is logged; the markers are written to every
        covered queue right after (then, at commit, its offsets), as Kafka does: until they
        are, the queues' LSO holds, so no reader sees the transaction's records early, and
        the id's next requests wait for them. Returns the producer id and epoch the next
        transaction runs under. With ``bump`` (the transaction protocol v2) the epoch moves
        on at every end, so a late write of the ended transaction is fenced; an abort with
        nothing open bumps it too, and a retry (with the ended transaction's epoch) is
        answered again."""
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        meta = self.transactions.get(transactional_id)
        if meta is not None:
            await self._written(meta)
        if (bump and meta is not None and meta.state is done and not meta.lock.locked()
                and (producer_id, producer_epoch) == (meta.last_producer_id, meta.last_producer_epoch)):
            return meta.producer_id, meta.producer_epoch
        meta = self._checked(transactional_id, producer_id, producer_epoch)
        async with meta.lock:
            if meta.state is TxnState.ONGOING:
                if bump:
                    self._end_epoch(meta)
                meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
                await self._saved(meta)  # durable before the answer and any marker
                if bump and meta.producer_epoch == meta.last_producer_epoch:
                    await self._complete(meta)  # epochs used up: the markers before the id moves on
                else:
                    self._complete_soon(meta)
            elif bump and not commit:  # nothing open to abort (v2 clients cannot always know)
                self._end_epoch(meta)
                meta.state = done
                await self._saved(meta)
            elif bump or meta.state is not done:  # v1: a retried EndTxn of what just ended is answered again
                raise InvalidTxnState(f"{transactional_id!r} has no open transaction to "
                                      f"{'commit' if commit else 'abort'} ({meta.state.value})")
            if bump and meta.producer_epoch == meta.last_producer_epoch:  # epochs used up
                self._bump(meta)
                self._save(meta, next_pid=self.next_producer_id)
                await self.log.flushed()
            return meta.producer_id, meta.producer_epoch

    async def _written(self, meta: TxnMetadata) -> None:
        """Once the markers of ``meta``'s answered EndTxn are written (at once if none are
        pending); a transaction left prepared by a refused marker has them written again
        first. A cancelled waiter leaves them be."""
        if meta.state in _PREPARING and not meta.lock.locked() and (
                meta.completion is None or meta.completion.done()):
            self._complete_soon(meta)
        completion = meta.completion
        if completion is not None and not completion.done():
            await asyncio.wait((completion,))

    def _complete_soon(self, meta: TxnMetadata) -> None:
        """Write the prepared transaction's markers in a task of their own, after the answer."""
        task = asyncio.ensure_future(self._complete_prepared(meta))
        meta.completion = task
        self._completing.add(task)
        task.add_done_callback(self._completing.discard)

    async def _complete_prepared(self, meta: TxnMetadata) -> None:
        async with meta.lock:
            if meta.state not in _PREPARING:  # completed meanwhile (InitProducerId)
                return
            try:
                await self._complete(meta)
            except BrokerError as exc:  # left prepared: the id's next request tries again
                log.warning("the markers of %r are not written: %s", meta.transactional_id, exc)
            except Exception:
                log.exception("writing the markers of %r failed", meta.transactional_id)

    @staticmethod
    def _end_epoch(meta: TxnMetadata) -> None:
        """The transaction protocol v2's bump at an end: the markers carry the new epoch (the
        producer id stays: its open and aborted ranges are the transaction's); an exhausted
        epoch stays, and the end then moves the id on."""
        meta.last_producer_id, meta.last_producer_epoch = meta.producer_id, meta.producer_epoch
        if meta.producer_epoch < _MAX_EPOCH:
            meta.producer_epoch += 1

    async def _complete(self, meta: TxnMetadata) -> None:
        commit = meta.state is TxnState.PREPARE_COMMIT
        aborted = []
        pid = meta.producer_id
        for topic, queue_id in meta.partitions:  # before the markers: readers must skip them
            self._queue(topic, queue_id)
        # one control batch for every queue (the put copies it, with each queue's offset); a
        # refused put (a full disk) raises: the transaction stays prepared, and the id's next
        # request, or a restart, writes its markers again
        now = now_ms()
        batch = build_batch([Record(0, 0, _MARKER_KEYS[commit], _MARKER_VALUE)], base_timestamp=now,
                            producer_id=pid, producer_epoch=meta.producer_epoch, transactional=True, control=True)
        markers = await self._put_markers(list(meta.partitions), batch, now)
        for ((topic, queue_id), first), marker in zip(meta.partitions.items(), markers):
            if isinstance(marker, TopicNotFound):  # the topic went away: nothing there to end
                log.warning("no %s marker in %s-%d for %r: %s", "commit" if commit else "abort",
                            topic, queue_id, meta.transactional_id, marker)
                marker = -1
            state = self._queue(topic, queue_id)
            state.open.pop(pid, None)
            if not commit and marker >= 0:
                state.aborted.append(AbortedRange(pid, first, marker))
                aborted.append([topic, queue_id, pid, first, marker])
            if marker >= 0:  # readers held at the LSO look again
                self._notify(topic, queue_id, self._max_offset(topic, queue_id))
        if commit and meta.offsets:
            for (group, topic, queue_id), (offset, metadata) in meta.offsets.items():
                self._commit_offset(group, topic, queue_id, offset, metadata)
            # on disk before the transaction is logged complete: a crash in between leaves
            # it prepared, and recovery commits the same offsets again
            await self._offsets_durable()
        meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        ended = [[t, q] for t, q in meta.partitions]
        meta.partitions.clear()
        meta.written.clear()
        meta.groups.clear()
        meta.offsets.clear()
        meta.start_ms = -1
        self._save(meta, aborted=aborted, ended=ended)
        if self.log.wants_compaction:
            self._compact()
        else:
            await self.log.flushed()

    # ------------------------------------------------------------------ timeouts
    def run(self) -> Coroutine[Any, Any, None]:
        """Abort transactions open longer than their timeout (and fence their producer); at
        stop, wait for the markers of answered EndTxns. The stop event is made fresh here,
        when the task is made (a master promoted again runs this again; a `stop` before the
        task first runs still ends it)."""
        self._stop = asyncio.Event()
        return self._run(self._stop)

    async def _run(self, stop: asyncio.Event) -> None:
        await run_every(self.check_interval_ms / 1000, self.abort_expired, stop,
                        name="aborting timed-out transactions")  # a failed round: retried next
        if self._completing:  # answered EndTxns' markers, written while the store is up
            await asyncio.wait(set(self._completing))

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """After `run` has ended: the log is closed (a later change would reopen it)."""
        self.log.close()

    async def abort_expired(self) -> int:
        now = self._clock()
        expired = [m for m in self.transactions.values()
                   if m.state is TxnState.ONGOING and now - m.start_ms > m.timeout_ms]
        for meta in expired:
            async with meta.lock:
                if meta.state is not TxnState.ONGOING:
                    continue
                log.info("transaction %r timed out after %d ms: aborted", meta.transactional_id,
                         meta.timeout_ms)
                # its producer learns on its next request; a v2 producer's EndTxn(abort) with
                # the fenced epoch is then answered as a retry of this abort, as Kafka 4 does
                meta.last_producer_id, meta.last_producer_epoch = meta.producer_id, meta.producer_epoch
                self._fence(meta)
                meta.state = TxnState.PREPARE_ABORT
                await self._saved(meta)
                await self._complete(meta)
        return len(expired)

    # ------------------------------------------------------------------ admin
    def matching(self, states: list[str], producer_ids: list[int], min_duration_ms: int = -1) -> list[TxnMetadata]:
        """ListTransactions' filters (empty: any; a duration: open at least that long)."""
        now = self._clock()
        return [m for m in self.transactions.values()
                if (not states or m.state.value in states)
                and (not producer_ids or m.producer_id in producer_ids)
                and (min_duration_ms < 0 or (m.start_ms >= 0 and now - m.start_ms >= min_duration_ms))]

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: its queues' read-rule state goes (a topic created again
        under the name starts at offset 0, where old aborted ranges must not apply)."""
        if any(t == topic for t, _ in self.queues):
            self._forget(topic)
            self._append({"forget_topic": topic})

    # ------------------------------------------------------------------ internals
    def _forget(self, topic: str) -> None:
        for key in [k for k in self.queues if k[0] == topic]:
            del self.queues[key]

    def _queue(self, topic: str, queue_id: int) -> QueueTxnState:
        state = self.queues.get((topic, queue_id))
        if state is None:
            state = self.queues[(topic, queue_id)] = QueueTxnState()
        return state

    def _save(self, meta: TxnMetadata, **extra: Any) -> None:
        self._append({**meta.to_json(), **extra})

    def _append(self, record: dict[str, Any]) -> None:
        self.log.append(record)
        for listener in self.listeners:
            listener([record])

    async def _saved(self, meta: TxnMetadata, **extra: Any) -> None:
        """`_save`, and under SYNC_FLUSH on disk before the caller answers or goes on."""
        self._save(meta, **extra)
        await self.log.flushed()

    def _compact(self) -> None:
        ranges = []
        for (topic, queue_id), state in self.queues.items():
            state.forget_before(self._min_offset(topic, queue_id))
            ranges += [[topic, queue_id, r.producer_id, r.first_offset, r.last_offset] for r in state.aborted]
        self.log.rewrite([{"next_pid": self.next_producer_id, "aborted": ranges,
                           "ended": [[t, q] for t, q in self.queues]},
                          *(m.to_json() for m in self.transactions.values())])
