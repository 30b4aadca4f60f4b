"""StoreCheckpoint: how far each structure is known durable, and the abort marker.

    magic "RPCK" | version u16 | physicOffset i64 | dispatchedOffset i64 | indexOffset i64 |
    verifyFrom i64 | timestamp i64 | queueCount i32 |
    queueCount x (topicLength u8 | topic | queueId i32 | maxOffset i64) | crc32 u32

dispatchedOffset and indexOffset are record boundaries up to which ConsumeQueues and index
files were flushed before the checkpoint was written; recovery re-dispatches from there.
verifyFrom is an older record boundary: recovery CRC-checks records from it, so a garbled
tail is found even after a clean shutdown. The queue table records each ConsumeQueue's max
offset, so a deleted or truncated ConsumeQueue is noticed and rebuilt. Written atomically
(temp file, fsync, rename); a torn or corrupt checkpoint is treated as absent.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field

CHECKPOINT_MAGIC = b"RPCK"
CHECKPOINT_VERSION = 1
FIXED = struct.Struct(">4sHqqqqqi")
QUEUE_ID_OFFSET = struct.Struct(">iq")
CRC = struct.Struct(">I")
QUEUE_OFFSET = struct.Struct(">q")
# (topic, queue id) -> its encoded topic length, topic and queue id: a checkpoint a second
# names every queue (100,000 of them), and only their offsets change
_KEYS: dict[tuple[str, int], bytes] = {}


@dataclass(slots=True)
class Checkpoint:
    physic_offset: int = 0
    dispatched_offset: int = 0
    index_offset: int = 0
    verify_from: int = 0
    timestamp: int = 0
    queues: dict[tuple[str, int], int] = field(default_factory=dict)

    def encode(self) -> bytes:
        parts = [FIXED.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, self.physic_offset,
                            self.dispatched_offset, self.index_offset, self.verify_from,
                            self.timestamp, len(self.queues))]
        keys, pack = _KEYS, QUEUE_OFFSET.pack
        if len(keys) > 2 * len(self.queues) + 4096:  # deleted topics' keys go now and then
            keys.clear()
        for key, max_offset in sorted(self.queues.items()):
            head = keys.get(key)
            if head is None:
                t = key[0].encode()
                head = keys[key] = bytes((len(t),)) + t + key[1].to_bytes(4, "big", signed=True)
            parts.append(head)
            parts.append(pack(max_offset))
        body = b"".join(parts)
        return body + CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> "Checkpoint | None":
        if len(data) < FIXED.size + CRC.size:
            return None
        body, (crc,) = data[:-CRC.size], CRC.unpack(data[-CRC.size:])
        if zlib.crc32(body) != crc:
            return None
        magic, version, phys, disp, idx, verify, ts, count = FIXED.unpack_from(body, 0)
        if magic != CHECKPOINT_MAGIC or version != CHECKPOINT_VERSION:
            return None
        pos = FIXED.size
        queues: dict[tuple[str, int], int] = {}
        for _ in range(count):
            n = body[pos]
            topic = body[pos + 1:pos + 1 + n].decode()
            qid, max_offset = QUEUE_ID_OFFSET.unpack_from(body, pos + 1 + n)
            queues[(topic, qid)] = max_offset
            pos += 1 + n + QUEUE_ID_OFFSET.size
        return cls(phys, disp, idx, verify, ts, queues)


class CheckpointFile:
    def __init__(self, root_dir: str) -> None:
        self.path = os.path.join(root_dir, "checkpoint")
        self.abort_path = os.path.join(root_dir, "abort")

    def load(self) -> Checkpoint | None:
        try:
            with open(self.path, "rb") as f:
                return Checkpoint.decode(f.read())
        except FileNotFoundError:
            return None

    def save(self, cp: Checkpoint) -> None:
        """Atomic replace (blocking: call from a worker thread on the hot path)."""
        write_atomically(self.path, cp.encode())

    def crashed_last_time(self) -> bool:
        return os.path.exists(self.abort_path)

    def mark_running(self) -> None:
        with open(self.abort_path, "wb") as f:
            f.flush()
            os.fsync(f.fileno())

    def mark_clean_shutdown(self) -> None:
        try:
            os.unlink(self.abort_path)
        except FileNotFoundError:
            pass


def write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
