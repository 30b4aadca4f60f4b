"""Child process for the crash test: writes with SYNC_FLUSH and reports every ack.

Usage: python crash_child.py STORE_DIR CYCLE. Prints "queue offset crc" per acknowledged
message on stdout (flushed at once) until it is killed. Each body carries (cycle, seq,
queue) and a payload derived from them, so the parent can check any message it reads.
"""

import asyncio
import sys
import zlib

from rocketport.common.message import Message
from rocketport.core.config import BrokerConfig
from rocketport.core.store.message_store import MessageStore

QUEUES = 4


def body_for(cycle: int, seq: int, queue: int) -> bytes:
    head = cycle.to_bytes(4, "big") + seq.to_bytes(4, "big") + queue.to_bytes(2, "big")
    size = 20 + (seq * 37 + cycle * 11) % 300
    return head + (zlib.crc32(head).to_bytes(4, "big") * (size // 4 + 1))[:size]


def key_for(body: bytes) -> str:
    """The KEYS every message carries, from the (cycle, seq, queue) head of its body."""
    return "k" + body[:10].hex()


def config(root: str) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024,
                        mapped_file_size_consume_queue=20 * 512, flush_disk_type="SYNC_FLUSH",
                        flush_interval_consume_queue=30, max_hash_slot_num=256, max_index_num=4096)


async def main(root: str, cycle: int) -> None:
    store = MessageStore(config(root))
    store.open()
    await store.start()
    out = sys.stdout

    async def producer(queue: int) -> None:
        seq = 0
        while True:
            if seq % 5 == 4:  # some record batches among single sends
                bodies = [body_for(cycle, seq + k, queue) for k in range(3)]
                msgs = [Message("C", b, {"KEYS": key_for(b)}, queue_id=queue) for b in bodies]
                r = await store.put_messages(msgs)
                for k, m in enumerate(msgs):
                    out.write(f"{queue} {r.queue_offset + k} {zlib.crc32(m.body)}\n")
                seq += 3
            else:
                body = body_for(cycle, seq, queue)
                r = await store.put_message(Message("C", body, {"KEYS": key_for(body)}, queue_id=queue))
                out.write(f"{queue} {r.queue_offset} {zlib.crc32(body)}\n")
                seq += 1
            out.flush()

    out.write("ready\n")
    out.flush()
    await asyncio.gather(*(producer(q) for q in range(QUEUES)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
