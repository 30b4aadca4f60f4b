"""Producer deduplication by key: a message that carries a DEDUP_KEY property already
stored in its topic is not stored again. The messages of one put (a batch) that share a
key are one unit: stored together, or dropped together by a later put of that key.

Why: a writer that retries (a Spark task attempt run again, a streaming micro-batch
replayed after a restart) resends exactly what an earlier attempt may already have stored.
When it names every message (or every batch) with a deterministic key, the broker drops
the repeats, so consumers see each message once. A put whose key is being stored by a
concurrent put waits for that one: stored, it is a repeat; refused, it is stored. A repeat
is answered with the result of the put that stored the key, so the producer sees a success.

Where the keys come from: the last `capacity` keys this process stored are kept in memory;
every other key is recalled from the log. The index builder indexes a record's DEDUP_KEY
as it indexes KEYS (core/store/index_service.py), once for a run of records in a row that
carry one key (a unit: a chunk of 512 messages costs one entry, not 512; the recall reads
the run on from its first record), and an inner batch's (the Spark sink's chunk, one
record: its count is the batch's INNER_NUM), so a key is found again through
the same derivation from the CommitLog that rebuilds the index after a crash (and that a
replica running the same dispatch would run). `floor` is the commit-log offset below which a
record's key may be missing from memory: the log's end when the store opened, raised as
keys are forgotten. Only a key missing from memory while `floor` is above 0 is recalled;
the recall first waits until the index covers the log below `floor`. With
messageIndexEnable off nothing can be recalled: the window is then memory only.

Messages without the property cost nothing here: the produce role sends only messages
whose encoded properties name DEDUP_KEY through `DedupWindow.put`, and a remoting batch
body whose entries all name one key through `claim_now` (decided without awaiting, the
body stored undecoded) or `put_unit`, as a record batch sent to be stored whole with one
(`put_inner_batch_send`) goes through `put_unit`. This module never writes the store.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rocketport.common.message import (
    PROPERTY_DEDUP_KEY,
    PROPERTY_INNER_NUM,
    Message,
    MessageExt,
    property_bytes,
    property_needles,
)

from .store.writer import PutResult

if TYPE_CHECKING:
    from .store.message_store import MessageStore

__all__ = ["DEDUP_NEEDLE", "DedupWindow", "dedup_key", "recall_stored", "shared_dedup_key"]

DEDUP_NEEDLE = PROPERTY_DEDUP_KEY.encode() + b"\x01"  # found in encoded properties
_DEDUP_NEEDLES = property_needles(PROPERTY_DEDUP_KEY)
DEFAULT_CAPACITY = 100_000  # keys kept (~15 MB); a batch of messages may share one key
RECALL_MAX = 4096  # records of one stored unit a recalled answer names

Key = tuple[str, str]  # (topic, key)


Recall = Callable[[Key, int], Awaitable["PutResult | None"]]


def dedup_key(msg: Message) -> str | None:
    return msg.properties.get(PROPERTY_DEDUP_KEY) if msg.properties else None


def shared_dedup_key(properties: list[bytes]) -> str | None:
    """The DEDUP_KEY every one of these encoded properties names, read undecoded (as
    `decode_properties` reads it), or None when one names another or none."""
    if not properties:
        return None
    key = property_bytes(properties[0], _DEDUP_NEEDLES)
    if key is None:
        return None
    for raw in properties:
        if property_bytes(raw, _DEDUP_NEEDLES) != key:
            return None
    return key.decode("utf-8", "surrogateescape")


class DedupWindow:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, recall: Recall | None = None) -> None:
        """``recall(key, below)``: the answer for a key stored in the log below commit-log
        offset ``below``, or None (see the module docstring)."""
        self.capacity = capacity
        self._stored: OrderedDict[Key, PutResult] = OrderedDict()  # key -> the put's result
        self._pending: dict[Key, asyncio.Future] = {}
        self._recall = recall
        self.floor = 0  # keys of records below this offset may be in the log only
        self.dropped = 0  # messages not stored because their key was
        self.recalled = 0  # keys found in the log, not in memory

    def __contains__(self, key: Key) -> bool:
        return key in self._stored

    async def put(self, msgs: list[Message], store: Callable[[list[Message]], Awaitable[PutResult]]) -> PutResult:
        """Store through `store` the messages of `msgs` whose key is not stored yet (and
        those without a key); the result of `store`, or, when every message is a repeat,
        the result of the put that stored the first one's key."""
        fresh: list[Message] = []
        claimed: list[Key] = []
        earlier: PutResult | None = None
        for msg in msgs:
            key = dedup_key(msg)
            if key is None:
                fresh.append(msg)
                continue
            k = (msg.topic, key)
            if k in claimed:  # messages of one put sharing a key are one unit: all kept
                fresh.append(msg)
                continue
            stored = await self._admit(k)
            if stored is not None:
                self.dropped += 1
                if earlier is None:
                    earlier = stored
                continue
            claimed.append(k)
            fresh.append(msg)
        if not fresh:  # every message a repeat (put_messages refuses an empty batch first)
            assert earlier is not None
            return earlier
        result = await self._put_claimed(claimed, store(fresh))
        assert result is not None  # `store` answers a PutResult or raises
        return result

    async def put_unit(self, k: Key, count: int,
                       store: Callable[[], Awaitable[PutResult | None]]) -> PutResult | None:
        """`put` for ``count`` messages that all carry the key ``k`` (one unit: a remoting
        batch body whose every entry names one DEDUP_KEY), stored by ``store()`` unless
        ``k`` is stored already: then the earlier put's result (None: what ``store()``
        answered)."""
        stored = await self._admit(k)
        if stored is not None:
            self.dropped += count
            return stored
        return await self._put_claimed([k], store())

    def claim_now(self, k: Key, count: int) -> PutResult | bool:
        """`put_unit` decided without awaiting, where it can be: the earlier put's result
        for a repeat (``count`` messages dropped); True when ``k`` is claimed, and the
        caller stores its unit and calls `settle` with the outcome; False when only
        `put_unit` can tell (a concurrent put of ``k`` in flight, or a recall)."""
        if k in self._pending or (k not in self._stored and self.floor and self._recall is not None):
            return False
        stored = self._stored.get(k)
        if stored is not None:
            self.dropped += count
            return stored
        self._pending[k] = asyncio.get_running_loop().create_future()
        return True

    def settle(self, k: Key, result: PutResult | None) -> None:
        """The outcome of the put of a unit claimed by `claim_now` (None: not stored)."""
        self._settle([k], result)

    async def _admit(self, k: Key) -> PutResult | None:
        """The stored result for ``k`` (a repeat), or None with ``k`` claimed by the caller,
        who settles it. Waits for a concurrent put of ``k`` first, and recalls ``k`` from
        the log when it may be there only."""
        while (waiting := self._pending.get(k)) is not None:
            await asyncio.shield(waiting)  # a concurrent put of this key: its outcome decides
        if k not in self._stored and self.floor and self._recall is not None:
            await self._recall_key(k)
        stored = self._stored.get(k)
        if stored is None:
            self._pending[k] = asyncio.get_running_loop().create_future()
        return stored

    async def _put_claimed(self, claimed: list[Key],
                           put: Awaitable[PutResult | None]) -> PutResult | None:
        """``put``'s result, with the keys it claimed settled by its outcome (None: not stored)."""
        try:
            result = await put
        except BaseException:
            self._settle(claimed, None)
            raise
        self._settle(claimed, result)
        return result

    async def _recall_key(self, k: Key) -> None:
        """Look ``k`` up in the log below `floor`, claimed meanwhile so that a concurrent
        put of it waits for the answer; kept in memory when found."""
        recall = self._recall
        assert recall is not None  # put asks only when there is one
        self._pending[k] = asyncio.get_running_loop().create_future()
        try:
            found = await recall(k, self.floor)
        except BaseException:
            self._settle([k], None)
            raise
        if found is not None:
            self.recalled += 1
        self._settle([k], found)

    def _settle(self, claimed: list[Key], result: PutResult | None) -> None:
        stored = self._stored
        for k in claimed:
            if result is not None:
                stored[k] = result
                stored.move_to_end(k)
            self._pending.pop(k).set_result(None)
        while len(stored) > self.capacity:
            _, forgotten = stored.popitem(last=False)
            self.floor = max(self.floor, forgotten.commit_log_offset + 1)


async def recall_stored(store: "MessageStore", k: Key, below: int) -> PutResult | None:
    """The answer for the unit stored under key ``k`` = (topic, DEDUP_KEY) below commit-log
    offset ``below``, rebuilt from its records, or None. The index holds the first record
    of each run of records with that key (core/store/index_service.py); each run is read
    on from there while the records that follow carry the key, every one checked. Waits
    until the index covers the log below ``below`` first."""
    topic, key = k
    index = store.index
    await index.catch_up(store, below)
    hits = index.lookup(f"{topic}#{key}", RECALL_MAX, 0, int(time.time() * 1000) + 1000)
    records: dict[int, MessageExt] = {}
    for phys in sorted({p for p in hits if p < below}):
        while phys < below and phys not in records and len(records) < RECALL_MAX:
            msg = store.message_at(phys)
            if msg is None or msg.topic != topic or msg.properties.get(PROPERTY_DEDUP_KEY) != key:
                break
            records[phys] = msg
            phys += msg.store_size
    if not records:
        return None
    found = [records[p] for p in sorted(records)]
    first = found[0]
    return PutResult(first.queue_id, first.queue_offset, first.commit_log_offset,
                     sum(m.store_size for m in found), first.store_timestamp,
                     sum(int(m.properties.get(PROPERTY_INNER_NUM, 1)) for m in found),  # an inner batch: its count
                     store.store_host,
                     tuple(m.commit_log_offset for m in found) if len(found) > 1 else ())
