"""`rocketport store verify|dump`: inspect a store directory without a running broker.

Everything is read through the declarative ``construct`` descriptions in
``rocketport.core.store.formats``, independently of the hot-path struct code, so these
tools double as a check of what the broker wrote. Read-only: they never modify a store.
"""

from __future__ import annotations

import mmap
import os
import zlib
from dataclasses import dataclass, field
from typing import Iterator

from construct import ConstructError
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from rocketport.common.message import INNER_BATCH_FLAG, decode_properties
from rocketport.core.store import formats
from rocketport.core.store.checkpoint import Checkpoint
from rocketport.core.store.index_file import INDEX_HEADER_SIZE

BLANK_MAGIC = formats.BlankRecord.subcons[1].subcon.value
MESSAGE_MAGIC = formats.CommitLogRecord.subcons[1].subcon.value


def _segments(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(n for n in os.listdir(directory) if len(n) == 20 and n.isdigit())


def _map(path: str) -> mmap.mmap | None:
    size = os.path.getsize(path)
    if size == 0:
        return None
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


@dataclass(slots=True)
class StoredRecord:
    offset: int
    record: object  # construct Container
    properties: dict[str, str]


@dataclass(slots=True)
class VerifyReport:
    segments: list[tuple[str, int]] = field(default_factory=list)
    records: int = 0
    messages: int = 0
    data_end: int = 0
    problems: list[str] = field(default_factory=list)
    queues: dict[str, int] = field(default_factory=dict)
    index_files: int = 0
    checkpoint: str = "absent"


PROGRESS_STEP = 8 << 20  # bytes of CommitLog between two updates of the progress bar


def walk_commitlog(root: str, problems: list[str] | None = None,
                   progress: Progress | None = None) -> Iterator[StoredRecord]:
    """Every valid record in offset order; stops at the first invalid one (noted)."""
    directory = os.path.join(root, "commitlog")
    names = _segments(directory)
    # bytes, advanced every PROGRESS_STEP within a segment: a 1 GiB segment is one step of
    # many seconds otherwise, and the bar would stand still until the walk ends
    sizes = [os.path.getsize(os.path.join(directory, name)) for name in names]
    task = progress.add_task("commit log", total=sum(sizes)) if progress else None
    try:
        for name, segment_size in zip(names, sizes):
            base = int(name)
            mm = _map(os.path.join(directory, name))
            if mm is None:
                if progress is not None:
                    progress.advance(task, segment_size)
                continue
            with mm:
                view = memoryview(mm)
                pos = 0
                size = len(mm)
                shown = 0
                try:
                    while pos + 8 <= size:
                        if progress is not None and pos - shown >= PROGRESS_STEP:
                            progress.advance(task, pos - shown)
                            shown = pos
                        total = int.from_bytes(view[pos:pos + 4], "big", signed=True)
                        magic = int.from_bytes(view[pos + 4:pos + 8], "big", signed=True)
                        if magic == BLANK_MAGIC:
                            break
                        if total == 0 and magic == 0:
                            return
                        if magic != MESSAGE_MAGIC or total <= 0 or pos + total > size:
                            if problems is not None:
                                problems.append(f"commit log {base + pos}: not a record (magic {magic & 0xffffffff:#x}, size {total})")
                            return
                        try:
                            rec = formats.CommitLogRecord.parse(view[pos:pos + total])
                        except ConstructError as exc:
                            if problems is not None:
                                problems.append(f"commit log {base + pos}: undecodable record: {exc}")
                            return
                        if problems is not None:
                            if zlib.crc32(rec.body) & 0x7FFFFFFF != rec.body_crc:
                                problems.append(f"commit log {base + pos}: body CRC mismatch")
                            if rec.physical_offset != base + pos:
                                problems.append(f"commit log {base + pos}: physical offset field says {rec.physical_offset}")
                        yield StoredRecord(base + pos, rec, decode_properties(rec.properties))
                        pos += total
                finally:
                    view.release()
            if progress is not None:
                progress.advance(task, segment_size - shown)
    finally:  # the data ends inside its last segment: the bar ends full
        if progress is not None:
            progress.update(task, completed=sum(sizes))


def verify(root: str, console: Console | None = None) -> VerifyReport:
    console = console or Console()
    report = VerifyReport()
    directory = os.path.join(root, "commitlog")
    names = _segments(directory)
    sizes = {os.path.getsize(os.path.join(directory, n)) for n in names}
    report.segments = [(n, os.path.getsize(os.path.join(directory, n))) for n in names]
    if len(sizes) > 1:
        report.problems.append(f"commit log segments have different sizes: {sorted(sizes)}")
    for a, b in zip(names, names[1:]):
        if int(a) + os.path.getsize(os.path.join(directory, a)) != int(b):
            report.problems.append(f"commit log segments {a} and {b} are not contiguous")
    records: dict[int, tuple[str, int, int, int]] = {}
    with Progress(console=console, transient=True) as progress:
        for sr in walk_commitlog(root, report.problems, progress):
            r = sr.record
            count = int(sr.properties.get("INNER_NUM", 1)) if r.sys_flag & INNER_BATCH_FLAG else 1
            records[sr.offset] = (r.topic, r.queue_id, r.queue_offset, count)
            report.records += 1
            report.messages += count
            report.data_end = sr.offset + r.total_size
        _verify_consume_queues(root, records, report, progress)
    index_dir = os.path.join(root, "index")
    if os.path.isdir(index_dir):
        for name in sorted(os.listdir(index_dir)):
            with open(os.path.join(index_dir, name), "rb") as f:
                header = formats.IndexHeader.parse(f.read(INDEX_HEADER_SIZE))
            report.index_files += 1
            if header.begin_timestamp > header.end_timestamp and header.index_count > 1:
                report.problems.append(f"index {name}: begin timestamp after end timestamp")
    cp_path = os.path.join(root, "checkpoint")
    if os.path.exists(cp_path):
        with open(cp_path, "rb") as f:
            data = f.read()
        cp = Checkpoint.decode(data)
        if cp is None:
            report.checkpoint = "corrupt"
            report.problems.append("checkpoint: CRC or magic mismatch")
        else:
            parsed = formats.CheckpointFormat.parse(data)
            report.checkpoint = (f"physic {parsed.physic_offset}, dispatched "
                                 f"{parsed.dispatched_offset}, index {parsed.index_offset}")
            if cp.dispatched_offset > report.data_end:
                report.problems.append("checkpoint: dispatched offset beyond the valid log end "
                                       "(the broker truncates this on recovery)")
    return report


def _verify_consume_queues(root: str, records: dict, report: VerifyReport, progress: Progress) -> None:
    cq_root = os.path.join(root, "consumequeue")
    if not os.path.isdir(cq_root):
        return
    min_phys = min(records) if records else 0
    queues = [(t, q) for t in sorted(os.listdir(cq_root)) if os.path.isdir(os.path.join(cq_root, t))
              for q in sorted(os.listdir(os.path.join(cq_root, t)))]
    task = progress.add_task("consume queues", total=len(queues))
    for topic, qid in queues:
        directory = os.path.join(cq_root, topic, qid)
        count = 0
        for name in _segments(directory):
            first = int(name) // formats.ConsumeQueueEntry.sizeof()
            mm = _map(os.path.join(directory, name))
            if mm is None:
                continue
            with mm:
                for i in range(len(mm) // 20):
                    e = formats.ConsumeQueueEntry.parse(mm[i * 20:i * 20 + 20])
                    if e.size == 0:
                        break
                    logical = first + i
                    count = logical + 1
                    if e.commit_log_offset < min_phys:
                        continue  # its record was deleted by retention
                    rec = records.get(e.commit_log_offset)
                    where = f"consume queue {topic}/{qid} offset {logical}"
                    if rec is None:
                        report.problems.append(f"{where}: no record at commit log {e.commit_log_offset}")
                    elif rec[0] != topic or str(rec[1]) != qid:
                        report.problems.append(f"{where}: record belongs to {rec[0]}/{rec[1]}")
                    elif not rec[2] <= logical < rec[2] + rec[3]:
                        report.problems.append(f"{where}: record has queue offset {rec[2]}")
        report.queues[f"{topic}/{qid}"] = count
        progress.advance(task)


def print_verify(report: VerifyReport, console: Console) -> None:
    table = Table(title="commit log segments")
    table.add_column("segment")
    table.add_column("size", justify="right")
    for name, size in report.segments:
        table.add_row(name, f"{size:,}")
    console.print(table)
    console.print(f"records: {report.records:,}  messages: {report.messages:,}  "
                  f"valid data ends at: {report.data_end:,}")
    qt = Table(title="consume queues")
    qt.add_column("topic/queue")
    qt.add_column("max offset", justify="right")
    for name, n in report.queues.items():
        qt.add_row(name, f"{n:,}")
    console.print(qt)
    console.print(f"index files: {report.index_files}  checkpoint: {report.checkpoint}")
    if report.problems:
        console.print(f"[red]{len(report.problems)} problem(s):[/red]")
        for p in report.problems[:50]:
            console.print(f"  - {p}", soft_wrap=True, markup=False)
    else:
        console.print("[green]store is consistent[/green]")


def dump(root: str, console: Console, *, topic: str | None, queue: int | None,
         offset: int, limit: int) -> int:
    """Print messages as a table: by topic/queue via the ConsumeQueue, else the whole log.
    The walk to them shows its progress on a terminal (a topic's messages may be far in)."""
    table = Table()
    for col in ("commit log", "topic", "queue", "queue offset", "store time", "tags", "keys", "body"):
        table.add_column(col)
    with Progress(console=console, transient=True) as progress:
        shown = _dump_rows(walk_commitlog(root, progress=progress), table, topic, queue, offset, limit)
    console.print(table)
    return shown


def _dump_rows(records: Iterator[StoredRecord], table: Table, topic: str | None, queue: int | None,
               offset: int, limit: int) -> int:
    shown = 0
    for sr in records:
        r = sr.record
        if topic is not None and r.topic != topic:
            continue
        if queue is not None and r.queue_id != queue:
            continue
        count = int(sr.properties.get("INNER_NUM", 1)) if r.sys_flag & INNER_BATCH_FLAG else 1
        if r.queue_offset + count <= offset and topic is not None:
            continue
        body = bytes(r.body)
        preview = body[:40].decode("utf-8", "replace") + ("…" if len(body) > 40 else "")
        if count > 1:
            preview = f"[inner batch of {count}] " + f"{len(body)} bytes"
        table.add_row(str(sr.offset), r.topic, str(r.queue_id), str(r.queue_offset),
                      str(r.store_timestamp), sr.properties.get("TAGS", ""),
                      sr.properties.get("KEYS", ""), preview)
        shown += 1
        if shown >= limit:
            break
    return shown
