"""Child for the recovery-tags test: a whole broker (Kafka and remoting listeners) on a store.

Usage: python recovery_tags_child.py STORE_DIR. Creates the topic (a no-op after a restart),
prints one JSON line {"kafka": port, "remoting": "host:port", "recovery": report} and serves
until it is killed: the parent produces and pulls over the sockets, as real clients would.
"""

import asyncio
import json
import sys

from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.server import BrokerServer

TOPIC = "KT"
QUEUES = 2


def config(root: str) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=4 << 20,
                        mapped_file_size_consume_queue=20 * 1024, max_hash_slot_num=256,
                        max_index_num=4096, listen_port=0,
                        kafka=ProtocolConfig(True, 0, "127.0.0.1"),
                        namesrv=ProtocolConfig(True, 0, "127.0.0.1"), stomp=ProtocolConfig(False, 0),
                        amqp=ProtocolConfig(False, 0))


async def main(root: str) -> None:
    server = BrokerServer(config(root))
    await server.start()
    broker = server.broker
    if broker.get_topic(TOPIC) is None:
        await broker.create_topic_ready(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    print(json.dumps({"kafka": server.front_ends["kafka"].endpoints()[0][2],
                      "remoting": server.front_ends["remoting"].broker_addr(),
                      "recovery": broker.store.recovery_report,
                      "crashed": broker.store.recovered_from_crash}), flush=True)
    await asyncio.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
