"""The one inner-batch expander: a stored record batch decompressed and decoded at most once.

A Kafka record batch is stored whole, as one CommitLog record that the ConsumeQueue indexes
as many logical offsets (an inner batch). Everything that reads it per record — a remoting
pull's body, the per-record filter, decoded messages (``GetResult.messages``), key lookups,
the index builder — asks for an :class:`ExpandedBatch` through a :class:`BatchCache`, so a
batch read by many pulls (a 32-message pull over a 1,000-record batch is 32 pulls), or cut
into many segments by a filter, is decompressed once and its records decoded once:

- ``payload``: the records payload, decompressed when the batch's codec says so (a copy
  either way, so it outlives the mapping it came from);
- ``record(i)``, ``records()``: records, each decoded once, in order, as far as asked;
- ``span(first_delta, end_delta)``: the indexes of the records whose offset delta falls in
  a range, which is what a reader of logical offsets [first, end) of the batch wants;
- ``properties(index, tag_header)``: the record as a message's properties (the mapping of
  ``core.batch.messages``), built once per record, shared by the filter and the encoder:
  callers must not modify it (copy it first).

The cache is keyed by whatever names a stored batch for its owner (the store uses the
record's CommitLog position plus fields of its header, see ``core.store.inner_batch``): a
batch's stored bytes never change while it exists, so nothing is ever invalidated. Entries
are evicted least recently used first, to stay within a number of batches and an estimate
of their memory; the entry just read is never evicted, so even a batch larger than the whole
budget is decoded once while its reader walks it.

Knows nothing of the store's record layout; never writes, never imports a protocol. Used
from the event loop's thread (no locking).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

from .messages import record_properties
from .record_batch import Buffer, CorruptBatch, Record, batch_payload, iter_payload_records, parse_header

__all__ = ["BatchCache", "CacheStats", "ExpandedBatch", "DEFAULT_MAX_BATCHES", "DEFAULT_MAX_BYTES"]

DEFAULT_MAX_BATCHES = 256
DEFAULT_MAX_BYTES = 64 << 20
# Memory a decoded record takes beyond its share of the payload, estimated (CPython 3.11):
# the Record, its key and value bytes objects, the headers list and its tuples and strings.
RECORD_COST = 320
# ... and the properties dict built for it (with its strings), once a reader asks for it.
PROPERTIES_COST = 400


@dataclass(slots=True)
class CacheStats:
    """Counters since the cache was made: what reading batches cost."""

    hits: int = 0
    misses: int = 0  # batches loaded: each checked and, if compressed, decompressed
    decompressions: int = 0  # loads of a compressed batch
    record_decodes: int = 0  # batches whose records were decoded (each record once, in order)
    evictions: int = 0


class ExpandedBatch:
    """One stored batch (v2 layout), decompressed once on load; its records decoded once,
    in order and only as far as a reader has asked (a pull from the start of a large batch
    does not decode its end)."""

    __slots__ = ("count", "base_timestamp", "compression", "control", "payload", "cost", "_records",
                 "_pending", "_error", "_contiguous", "_props", "_record_cost", "_cache", "_held")

    def __init__(self, batch: Buffer, cache: "BatchCache | None" = None) -> None:
        """Check the framing and decompress: raises CorruptBatch (CompressionError included)."""
        header = parse_header(batch)
        self.count, self.payload = batch_payload(batch)
        self.base_timestamp = header.base_timestamp
        self.compression = header.compression
        self.control = header.is_control  # a transaction marker's batch
        self.cost = len(self.payload) + 200
        self._records: list[Record] = []
        self._pending: Iterator[Record] | None = None  # the decoder, once started
        self._error: CorruptBatch | None = None
        self._contiguous = True  # every record decoded so far has offset delta == its index
        self._props: dict[str, list[dict[str, str] | None]] = {}
        # a decoded record: its share of the payload (key and value copies) and its objects
        self._record_cost = len(self.payload) // max(1, self.count) + RECORD_COST
        self._cache = cache
        self._held = False  # while its cache holds it (and counts its cost)
        if cache is not None:
            cache.stats.misses += 1
            if self.compression:
                cache.stats.decompressions += 1

    def _decode_to(self, end: int) -> list[Record]:
        """The records, decoded at least up to index ``end`` (exclusive) or the last one."""
        records = self._records
        if len(records) >= end:
            return records
        if self._error is not None:
            raise self._error
        pending = self._pending
        if pending is None:
            if len(records) >= self.count:
                return records
            pending = self._pending = iter_payload_records(self.payload, self.count)
            if self._cache is not None:
                self._cache.stats.record_decodes += 1
        before = n = len(records)
        append = records.append
        contiguous = self._contiguous
        try:
            for record in pending:
                append(record)
                if contiguous and record.offset_delta != n:
                    contiguous = False
                n += 1
                if n >= end:
                    break
            else:
                self._pending = None  # done, trailing bytes checked
        except CorruptBatch as exc:
            self._error = exc
            raise
        finally:
            self._contiguous = contiguous
            self._charge((n - before) * self._record_cost)
        return records

    def records(self) -> list[Record]:
        """Every record of the batch (CorruptBatch if they do not decode)."""
        return self._decode_to(self.count)

    def record(self, index: int) -> Record:
        """Record ``index``, decoding up to it if needed."""
        return self._decode_to(index + 1)[index]

    def span(self, first_delta: int, end_delta: int) -> range | list[int]:
        """Indexes of the records with ``first_delta <= offset delta < end_delta``, in order.
        A batch's deltas are 0..n-1 (checked as records are decoded): then the records up to
        ``end_delta`` are decoded and the indexes are the deltas. Any other batch is decoded
        whole and walked as stored, stopping at the first delta past the range."""
        if first_delta >= end_delta:
            return range(0)
        if self._contiguous:
            records = self._decode_to(end_delta)
            if self._contiguous:
                return range(max(0, first_delta), min(len(records), end_delta))
        out = []
        for i, record in enumerate(self.records()):
            delta = record.offset_delta
            if delta >= end_delta:
                break
            if delta >= first_delta:
                out.append(i)
        return out

    def properties(self, index: int, tag_header: str) -> dict[str, str]:
        """Record ``index`` as a message's properties (headers, KEYS, TAGS), built once: shared,
        so never modify it."""
        props = self._props.get(tag_header)
        if props is None:
            props = self._props[tag_header] = [None] * self.count
        p = props[index]
        if p is None:
            r = self.record(index)
            p = props[index] = record_properties(r.key, r.headers, tag_header)
            self._charge(PROPERTIES_COST)
        return p

    def own_properties(self, index: int, tag_header: str) -> dict[str, str]:
        """Record ``index``'s properties as a dict of the caller's own (a message handed
        out): a copy when `properties` built them already (a filter read them), else built
        and not kept (a plain read asks once per record)."""
        props = self._props.get(tag_header)
        if props is not None:
            p = props[index]
            if p is not None:
                return dict(p)
        r = self.record(index)
        return record_properties(r.key, r.headers, tag_header)

    def _charge(self, more: int) -> None:
        if more:
            self.cost += more
            if self._cache is not None:
                self._cache._charge(self, more)


class BatchCache:
    """Expanded batches by key, least recently used evicted beyond ``max_batches`` batches or
    ``max_bytes`` of estimated memory (never the entry being read)."""

    def __init__(self, max_batches: int = DEFAULT_MAX_BATCHES, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_batches = max(1, max_batches)
        self.max_bytes = max_bytes
        self.stats = CacheStats()
        self.bytes = 0
        self._entries: OrderedDict[Hashable, ExpandedBatch] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def get(self, key: Hashable, batch: Buffer) -> ExpandedBatch:
        """The expanded batch stored under ``key``; ``batch`` (its bytes, v2 layout) is read
        only on a miss. Raises CorruptBatch for a batch that does not load (nothing is kept)."""
        entries = self._entries
        found = entries.get(key)
        if found is not None:
            entries.move_to_end(key)
            self.stats.hits += 1
            return found
        expanded = ExpandedBatch(batch, self)
        expanded._held = True
        entries[key] = expanded
        self.bytes += expanded.cost
        self._evict()
        return expanded

    def clear(self) -> None:
        for entry in self._entries.values():
            entry._held = False
        self._entries.clear()
        self.bytes = 0

    def _charge(self, entry: ExpandedBatch, more: int) -> None:
        if entry._held:  # an evicted entry's memory is no longer ours to count
            self.bytes += more
            self._evict()

    def _evict(self) -> None:
        entries = self._entries
        while len(entries) > 1 and (len(entries) > self.max_batches or self.bytes > self.max_bytes):
            _, old = entries.popitem(last=False)
            old._held = False
            self.bytes -= old.cost
            self.stats.evictions += 1
