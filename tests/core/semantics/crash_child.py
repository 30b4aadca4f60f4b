"""Child process for the semantics crash tests: acknowledges puts until it is SIGKILLed.

Usage: python crash_child.py STORE_DIR MODE, MODE one of
- delay: puts to topic D with DELAY 1; prints "seq sent_ms" per acknowledged put;
- tx: puts prepared transactional messages to topic X; prints "seq" per acknowledged half;
- retry: puts to topic R and sends each back for group G; prints "seq" per acknowledged
  send-back.
Every body is "seq sent_ms". The broker runs SYNC_FLUSH so an acknowledgement is durable.
"""

import asyncio
import sys
import time

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig


def config(root: str) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=1 << 20,
                        mapped_file_size_consume_queue=20 * 1024, flush_disk_type="SYNC_FLUSH",
                        flush_interval_consume_queue=30, max_hash_slot_num=256, max_index_num=4096,
                        message_delay_level="1s 2s 3s", flush_delay_offset_interval=50,
                        flush_consumer_offset_interval=50, transaction_time_out=300,
                        transaction_check_interval=100, transaction_check_max=50)


async def main(root: str, mode: str) -> None:
    out = sys.stdout
    async with Broker(config(root)) as broker:
        for topic in ("D", "X", "R"):
            broker.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        out.write("ready\n")
        out.flush()
        seq = 0
        while True:
            sent = time.time_ns() // 1_000_000
            body = f"{seq} {sent}".encode()
            if mode == "delay":
                await broker.put_message(Message("D", body, {"DELAY": "1"}, queue_id=0))
                out.write(f"{seq} {sent}\n")
            elif mode == "tx":
                await broker.put_message(Message("X", body, {"TRAN_MSG": "true", "PGROUP": "P"}, queue_id=0))
                out.write(f"{seq}\n")
            else:
                r = await broker.put_message(Message("R", body, queue_id=0))
                await broker.send_back("G", r.commit_log_offset, delay_level=1)
                out.write(f"{seq}\n")
            out.flush()
            seq += 1
            await asyncio.sleep(0.002)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
