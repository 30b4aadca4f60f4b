"""Reads from a slave, real processes: the slave copies its master's topics (SlaveSynchronize)
and registers under the master's broker name with its own id; once the master is SIGKILLed
the name server drops it within seconds (its registration connection closed, as RocketMQ's
BrokerHousekeepingService) and the RocketMQ C++ client (PyPI rocketmq 0.4.4) pulls every message from the slave by itself, and
the slave refuses sends with RocketMQ's SERVICE_NOT_AVAILABLE."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from rocketport.client import Message, Producer
from rocketport.client.message import SendStatus
from rocketport.protocols.remoting import RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import ClusterInfo, decode_body
from tests.ha.cluster import master_and_slave, wait_for
from tests.ha.test_sync_master import runtime
from tests.support.processes import REPO
from tests.support.remoting import remoting_client, request

TOPIC = "SlaveReadTopic"
N = 200


async def cluster_info(namesrv: str) -> ClusterInfo:
    async with remoting_client(namesrv) as conn:
        resp = await conn.invoke(request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        return decode_body(ClusterInfo, resp.body)


async def topics_of(addr: str) -> set[str]:
    async with remoting_client(addr) as conn:
        resp = await conn.invoke(request(RequestCode.GET_ALL_TOPIC_CONFIG), 5)
        return set(json.loads(bytes(resp.body))["topicConfigTable"])


async def send_to(addr: str) -> int:
    async with remoting_client(addr) as conn:
        resp = await conn.invoke(request(RequestCode.SEND_MESSAGE_V2, {
            "a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0",
            "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}, b"to the slave"), 5)
        return resp.code


def test_consumers_read_from_the_slave_once_the_master_is_gone(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH")
    master.broker.start()
    slave_started = False
    try:
        async def produce() -> list:
            async with Producer(namesrv, "reads-producer") as producer:
                return [await producer.send(Message(TOPIC, b"body-%d" % i)) for i in range(N)]
        assert {r.status for r in asyncio.run(produce())} == {SendStatus.SEND_OK}
        slave.broker.start()
        slave_started = True
        wait_for(lambda: TOPIC in asyncio.run(topics_of(slave.addr)), what="the slave's copy of the topics")
        wait_for(lambda: runtime(slave.addr).get("haSlaveLagBytes") == "0", what="the slave caught up")
        info = asyncio.run(cluster_info(namesrv))
        assert info.broker_addr_table["broker-a"].broker_addrs == {0: master.addr, 1: slave.addr}
        assert asyncio.run(send_to(slave.addr)) == ResponseCode.SERVICE_NOT_AVAILABLE
        master.broker.kill()  # no unregistration: its name-server connection closes
        wait_for(lambda: asyncio.run(cluster_info(namesrv)).broker_addr_table["broker-a"].broker_addrs
                 == {1: slave.addr}, timeout=5, what="the SIGKILLed master gone from the route")
        pulled = subprocess.run([sys.executable, "interop/rocketmq_py/client.py", "pull", namesrv, TOPIC,
                                 "slave-readers", str(N), "--timeout", "60"],
                                capture_output=True, text=True, timeout=120, cwd=REPO)
        bodies = sorted(json.loads(line)["body"] for line in pulled.stdout.splitlines() if line.startswith("{"))
        assert pulled.returncode == 0, pulled.stderr[-2000:]
        assert bodies == sorted(f"body-{i}" for i in range(N))
    finally:
        if slave_started:
            slave.broker.stop()
        master.broker.stop()
