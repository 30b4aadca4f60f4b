"""Child for the preparation crash test: creates topics (their queues' files made by the
segment preparer) and stores one message in each, SYNC_FLUSH, reporting every ack.

Usage: python prepare_crash_child.py STORE_DIR CYCLE. Prints "topic" once its message is
acknowledged, until it is killed.
"""

import asyncio
import sys

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig

QUEUES = 4


def config(root: str) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024,
                        mapped_file_size_consume_queue=20 * 512, flush_disk_type="SYNC_FLUSH",
                        max_hash_slot_num=256, max_index_num=4096, listen_port=0)


async def main(root: str, cycle: int) -> None:
    async with Broker(config(root)) as broker:
        print("ready", flush=True)
        for n in range(10_000):
            topic = f"T{cycle}x{n}"
            if n % 2:  # half the messages find the files made, half race the preparer
                await broker.create_topic_ready(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            else:
                broker.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            await broker.put_message(Message(topic, topic.encode(), queue_id=n % QUEUES))
            print(topic, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
