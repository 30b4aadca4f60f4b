"""Queue ranges: what one Spark partition reads, how they are planned, and how one is read.

A `QueueRange` is one queue's offsets [start, end) on the broker that hosts it, with the
broker-side filter (tag expression or SQL92) to send with every pull. Planning resolves the
offsets specs against the broker (earliest, latest, timestamps, per-queue JSON) and splits
ranges longer than `maxOffsetsPerPartition` (by offsets, or with a broker-side filter by
the rows a sample pull says they hold), and packs filtered pieces expected to return few
rows into one partition (`RangeGroup`). Reading pulls the range in broker-filtered chunks
and turns the pulled bytes into Arrow RecordBatches (`columns.py`, imported by the
read alone: planning runs in workers of its own).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rocketport.client.message import MessageQueue
from rocketport.client.pulling import PullStatus

from .options import EARLIEST, LATEST, OffsetSpec
from .remote import MAX_PULL, Link, subscription

ROWS_PER_BATCH = 8192  # the offline reader's rows per RecordBatch
BATCH_BYTES = 2 << 20  # pulled bytes per RecordBatch (about 8,000 rows of 100 B)
PULLS_IN_FLIGHT = 4
SAMPLE_ROWS = 128  # matches a planning sample stops at: enough to size a range's cut


@dataclass(frozen=True)
class QueueRange(InputPartition):
    topic: str
    broker: str
    addr: str
    queue_id: int
    start: int
    end: int
    tags: str | None
    sql: str | None

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)


def queue_key(mq: MessageQueue) -> str:
    """How a queue is named in offsets JSON: "broker:queueId"."""
    return f"{mq.broker_name}:{mq.queue_id}"


def resolve(link: Link, spec: OffsetSpec, mqs: list[MessageQueue], *,
            mins: list[int], maxs: list[int], unnamed: int = EARLIEST) -> list[int]:
    """Per queue, the offset `spec` names (clamped to what the queue holds); a queue
    per-queue JSON does not name gets `unnamed` (EARLIEST or LATEST)."""
    if spec.kind == "earliest":
        return list(mins)
    if spec.kind == "latest":
        return list(maxs)
    if spec.kind == "timestamp":
        found = link.offsets_by_time(mqs, spec.timestamp_ms)
        return [min(max(o, lo), hi) for o, lo, hi in zip(found, mins, maxs)]
    out = []
    for mq, lo, hi in zip(mqs, mins, maxs):
        value = spec.for_queue(mq.topic, mq.broker_name, mq.queue_id)
        if value is None:
            value = unnamed
        if value == LATEST:
            out.append(hi)
        elif value == EARLIEST:
            out.append(lo)
        else:
            out.append(min(max(value, lo), hi))
    return out


def split(template: QueueRange, max_len: int) -> list[QueueRange]:
    """The range cut into pieces of at most `max_len` offsets."""
    return [QueueRange(template.topic, template.broker, template.addr, template.queue_id,
                       s, min(s + max_len, template.end), template.tags, template.sql)
            for s in range(template.start, template.end, max_len)]


@dataclass(frozen=True)
class RangeGroup(InputPartition):
    """Broker-filtered queue ranges that one Spark task reads together (`read_group`):
    ranges expected to return few rows each would otherwise cost Spark a task each."""

    ranges: tuple[QueueRange, ...]


def split_filtered(link: Link, ranges: list[QueueRange], max_rows: int) -> list[tuple[QueueRange, float]]:
    """Broker-filtered ranges cut by the rows each is expected to return, not by their
    offsets, each piece with those rows (at most its length).

    A filtered partition costs the messages its filter lets through (the broker skips the
    others by their ConsumeQueue tags codes), while every partition costs Spark a task
    (0.1-0.2 s here), so cutting a 1%-selective range by its offsets makes many tasks that
    each return little. A range longer than `max_rows` is sampled with one pull of up to
    `SAMPLE_ROWS` matches from its start (the broker scans up to 65,536 entries for it with
    a tag filter, 16,000 with SQL92), the samples of all ranges sent together and their
    records counted, not decoded: the share that matched sizes the cut, and a range the
    pull scanned whole without a match is dropped.
    """
    sampled = [r for r in ranges if r.end - r.start > max_rows]
    samples = dict(zip(sampled, link.first_pulls(
        [(r.addr, r.mq, r.start, subscription(r.topic, r.tags, r.sql)) for r in sampled], SAMPLE_ROWS)))
    out: list[tuple[QueueRange, float]] = []
    for r in ranges:
        length = r.end - r.start
        if r not in samples:
            out.append((r, length))
            continue
        next_offset, body = samples[r]
        scanned = min(next_offset, r.end) - r.start
        if scanned <= 0:  # nothing learnt
            out += [(piece, piece.end - piece.start) for piece in split(r, max_rows)]
            continue
        matched = records_below(body, r.end)
        if scanned == length and not matched:
            continue
        expected = matched if scanned == length else matched * length / scanned
        pieces = split(r, math.ceil(length / max(1, math.ceil(expected / max_rows))))
        out += [(piece, expected * (piece.end - piece.start) / length) for piece in pieces]
    return out


_SIZE_AND_OFFSET = struct.Struct(">i16xq")  # a stored record's totalSize .. queueOffset


def records_below(body: bytes, end: int) -> int:
    """The records of a pull's body whose queue offset is below ``end``, read from their
    fixed headers (nothing decoded: a planning worker imports no numpy)."""
    count = pos = 0
    unpack = _SIZE_AND_OFFSET.unpack_from
    while pos + _SIZE_AND_OFFSET.size <= len(body):
        size, offset = unpack(body, pos)
        if size <= 0:
            break
        count += offset < end
        pos += size
    return count


def group_filtered(pieces: list[tuple[QueueRange, float]], max_rows: int) -> list[QueueRange | RangeGroup]:
    """Filtered pieces packed in order into partitions expected to return at most `max_rows`
    rows each: a 1%-selective read of four queues is one task, not four (a task costs
    Spark more than a few thousand rows do); a partition of one piece is that range."""
    out: list[QueueRange | RangeGroup] = []
    group: list[QueueRange] = []
    rows = 0.0
    for piece, expected in [*pieces, (None, math.inf)]:
        if group and rows + expected > max_rows:
            out.append(group[0] if len(group) == 1 else RangeGroup(tuple(group)))
            group, rows = [], 0.0
        if piece is not None:
            group.append(piece)
            rows += expected
    return out


def read_group(g: RangeGroup, group: str, namesrv: str) -> Iterator[pa.RecordBatch]:
    """Every range of ``g`` read at once, a thread each (the broker's scans of the ranges
    overlap), their RecordBatches yielded as each range completes: together they are
    expected to hold no more than a partition's rows."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    with ThreadPoolExecutor(len(g.ranges), thread_name_prefix="rocketport-range") as pool:
        reads = [pool.submit(lambda r: list(read_range(r, group, namesrv)), r) for r in g.ranges]
        for done in as_completed(reads):
            yield from done.result()


def read_range(r: QueueRange, group: str, namesrv: str) -> Iterator[pa.RecordBatch]:
    """Every message of the range that the broker's filter accepts, as RecordBatches made
    from the pulled bytes (`columns.to_batch`). The next pulls go out before the last ones'
    bytes are decoded, so the broker serves them meanwhile: `PULLS_IN_FLIGHT` go together,
    each starting where the one before is expected to end (its count on, or with a filter
    as far on as the last pull's scan went). A pull that ends elsewhere drops the later
    answers and the next pulls start where it ended; a filtered one that did (its count
    found before the broker's scan limit: dense matches) leaves the rest of the range to
    one pull at a time, as no step can be guessed."""
    # imported here, not by planning (a query's partitions): numpy and pyarrow.compute
    # cost a planning worker about 0.3 s
    from .columns import to_batch
    from .heap import keep_freed_heap
    keep_freed_heap()
    mq = r.mq
    sub = subscription(r.topic, r.tags, r.sql)
    filtered = bool(r.tags or r.sql)
    # how far one pull moves: its count without a filter; with one, as far as the broker
    # scans a get (learnt from the last pull that moved on), so filtered pulls go out
    # together too once one has come back
    step = 0 if filtered else MAX_PULL
    guess = True
    bodies: list[bytes] = []
    held = 0
    offset = r.start
    with Link(namesrv, group) as link:
        def send(at: int) -> tuple[list[tuple[int, int]], object]:
            requests = []
            while at < r.end and len(requests) < (PULLS_IN_FLIGHT if step else 1):
                requests.append((at, min(r.end - at, MAX_PULL)))
                at += step or MAX_PULL
            return requests, link.send_pulls(r.addr, mq, requests, sub)

        pending = send(offset) if offset < r.end else None
        while pending is not None:
            requests, task = pending
            ended = False
            for (start, _), (status, next_offset, body) in zip(requests, link.answers(task)):
                if start != offset:  # an earlier pull stopped short: go on from where it stopped
                    if filtered:
                        guess = False  # its matches are dense: one pull at a time from here
                    break
                if body:
                    bodies.append(body)
                    held += len(body)
                if status is PullStatus.NO_NEW_MSG or next_offset <= offset:
                    ended = True  # the queue ends before the range (or cannot move on)
                    break
                if filtered and guess:
                    step = next_offset - offset
                offset = next_offset
            if not guess:
                step = 0
            pending = None if ended or offset >= r.end else send(offset)
            if held >= BATCH_BYTES or (bodies and pending is None):
                yield to_batch(b"".join(bodies), r.topic, r.queue_id, r.end, sub.tags)
                bodies, held = [], 0
