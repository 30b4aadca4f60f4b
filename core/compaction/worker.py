"""The cleaner's CPU work in a worker process of its own, so that it never holds the broker's
GIL: the event loop (and every front-end on it) keeps its latency while a compaction runs.

The broker copies bounded chunks of records out of its store and hands them over; the
worker keeps each compaction's state (its offset map and the new snapshot being written)
between calls, by job id, and answers with small results (how far the scan got; the new
snapshot's index). One worker process serves every broker of the process (tests host
several), started on first use with the ``spawn`` method (never ``fork``: the broker has
threads and an event loop); as with any ``spawn``, a script that hosts a broker must guard
its start with ``if __name__ == "__main__":`` (``rocketport broker`` does). If the broker
dies, the worker sees its parent gone within half a second and exits; the snapshot it was
writing stays a ``.tmp`` that the next start removes.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from .cleaner import OffsetMap, kept, message_count, scan
from .snapshot import CompactedSnapshot, SnapshotIndex, SnapshotWriter, record_span

_executor: ProcessPoolExecutor | None = None
_executor_lock = threading.Lock()
_ids = itertools.count(1)


def _pool() -> ProcessPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_watch_parent, initargs=(os.getpid(),))
        return _executor


async def call(fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` in the worker process (BrokenProcessPool when it died: the next
    call starts another)."""
    global _executor
    pool = _pool()
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
    except BrokenProcessPool:
        with _executor_lock:
            if _executor is pool:
                _executor = None
        raise


def new_job_id() -> int:
    return next(_ids)


# ---------------------------------------------------------------- in the worker process
def _watch_parent(parent: int) -> None:
    """Run below the broker's priority (nice 10: on a busy machine the scheduler serves the
    event loop first), and exit once the broker is gone (a SIGKILL closes nothing the
    worker would notice)."""
    os.nice(10)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


@dataclass(slots=True)
class _Job:
    offset_map: OffsetMap
    writer: SnapshotWriter | None = None
    tombstone_before_ms: int = 0


_jobs: dict[int, _Job] = {}


def begin(job: int, max_keys: int) -> None:
    _jobs[job] = _Job(OffsetMap(max_keys))


def scan_chunk(job: int, records: list[bytes], horizon_ms: int) -> tuple[bool, int, int]:
    """Pass 1 over a chunk: (stopped early, scanned end offset, messages scanned so far)."""
    offset_map = _jobs[job].offset_map
    stopped = scan(offset_map, records, horizon_ms)
    return stopped, offset_map.end, offset_map.records


def start_writing(job: int, directory: str, start: int, tombstone_before_ms: int) -> None:
    state = _jobs[job]
    state.writer = SnapshotWriter(directory, start)
    state.tombstone_before_ms = tombstone_before_ms


def keep_chunk(job: int, records: list[bytes]) -> None:
    """Pass 2 over a chunk: what stays of it goes into the new snapshot."""
    state = _jobs[job]
    _keep(state, records)


def keep_from_snapshot(job: int, path: str, positions: list[int], sizes: list[int]) -> None:
    """Pass 2 over records of the old snapshot (read from its file here)."""
    state = _jobs[job]
    with open(path, "rb") as f:
        records = []
        for pos, size in zip(positions, sizes):
            f.seek(pos)
            records.append(f.read(size))
    _keep(state, records)


def _keep(state: _Job, records: list) -> None:
    latest, writer = state.offset_map.latest, state.writer
    assert writer is not None
    for record in records:
        out = kept(record, latest, state.tombstone_before_ms)
        if out is not None:
            first, last, batch = record_span(out)
            writer.append(out, first, last, batch, message_count(out))


def finish(job: int, end: int) -> tuple[str, int, int, int, SnapshotIndex]:
    """The new snapshot made durable and named: (path, start, end, messages, index)."""
    state = _jobs.pop(job)
    assert state.writer is not None
    snap = state.writer.finish(end)
    snap.close()
    return snap.path, snap.start, snap.end, snap.messages, snap.index


def abandon(job: int) -> None:
    state = _jobs.pop(job, None)
    if state is not None and state.writer is not None:
        state.writer.abandon()


def opened(path: str, start: int, end: int, messages: int, index: SnapshotIndex) -> CompactedSnapshot:
    """`finish`'s answer, opened in the broker's process."""
    return CompactedSnapshot(path, start, end, messages, index)
