"""Child process for test_lazy_queue_open: fills queues across ConsumeQueue segments, writes
a checkpoint, then puts more with no checkpoint after them (the checkpoint's max offsets
are then behind the files), says "ready" and waits to be killed.

Usage: python lazy_open_child.py STORE_DIR. Prints "topic queue count" per queue once its
messages are all acknowledged, then "ready".
"""

import asyncio
import sys

from rocketport.common.message import Message
from rocketport.core.config import BrokerConfig
from rocketport.core.store.message_store import MessageStore

QUEUES = 24
ENTRIES_PER_FILE = 16


def config(root: str) -> BrokerConfig:
    # no automatic ConsumeQueue flush: the one checkpoint is the child's own
    return BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024,
                        mapped_file_size_consume_queue=20 * ENTRIES_PER_FILE,
                        flush_interval_commit_log=20, flush_interval_consume_queue=600_000,
                        max_hash_slot_num=64, max_index_num=256)


def body(topic: str, queue: int, offset: int) -> bytes:
    return f"{topic}/{queue}/{offset}".encode()


async def main(root: str) -> None:
    store = MessageStore(config(root))
    store.open()
    await store.start()
    counts: dict[tuple[str, int], int] = {}

    async def put(topic: str, queue: int, n: int) -> None:
        start = counts.get((topic, queue), 0)
        for offset in range(start, start + n):
            await store.put_message(Message(topic, body(topic, queue, offset), queue_id=queue))
        counts[(topic, queue)] = start + n

    for q in range(QUEUES):  # 0 to 2 full segments and a part of one, in 6 topics
        await put(f"Lazy{q % 6}", q // 6, q * 2)
    end = store.commitlog.max_offset  # the checkpoint covers what was flushed, dispatched, indexed:
    for _ in range(1000):            # all of it first, however loaded the machine (at most 10 s)
        if min(store.flush_service.flushed_offset, store.dispatched_offset, store.index.built_offset) >= end:
            break
        await asyncio.sleep(0.01)
    await store.flush_queues_and_checkpoint()
    for q in range(0, QUEUES, 3):  # past the checkpoint: some into the next segment
        await put(f"Lazy{q % 6}", q // 6, ENTRIES_PER_FILE // 2 + 1)
    for (topic, queue), n in sorted(counts.items()):
        print(topic, queue, n)
    print("ready", flush=True)
    await asyncio.sleep(600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
