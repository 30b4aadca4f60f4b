"""A SIGKILLed slave keeps the delay-level progress its master's offset records brought it
(real processes): it writes delayOffset.json on the master's cadence, not only at a clean
stop. The slave has no name server, so SlaveSynchronize (which would copy the master's
table every 10 s) never runs: the replicated log is its only source."""

from __future__ import annotations

import asyncio

import orjson

from rocketport.client import Message, Producer
from rocketport.client.message import SendStatus
from rocketport.protocols.remoting import RequestCode
from tests.ha.cluster import node, wait_for
from tests.support.remoting import remoting_client, request

TOPIC = "HaDelayTopic"


def delay_offsets(addr: str) -> dict[str, int]:
    """The broker's delay-level offsets (GET_ALL_DELAY_OFFSET), {} while it is not up."""
    async def ask() -> dict[str, int]:
        async with remoting_client(addr) as conn:
            resp = await conn.invoke(request(RequestCode.GET_ALL_DELAY_OFFSET), 5)
            return orjson.loads(resp.body)["offsetTable"]
    try:
        return asyncio.run(ask())
    except Exception:  # noqa: BLE001 - not up yet: the poll asks again
        return {}


def saved(root) -> dict[str, int]:
    try:
        return orjson.loads((root / "config" / "delayOffset.json").read_bytes())["offsetTable"]
    except (OSError, ValueError, KeyError):
        return {}


async def send_delayed(namesrv: str, n: int) -> list:
    async with Producer(namesrv, "ha-delay-producer") as producer:
        return [await producer.send(Message(TOPIC, b"later-%d" % i, delay_level=1)) for i in range(n)]


def test_a_killed_slave_keeps_the_delay_offsets_it_was_sent(tmp_path, namesrv):
    master = node(tmp_path, "master", namesrv, "brokerRole=ASYNC_MASTER")
    slave = node(tmp_path, "slave", "", "brokerRole=SLAVE", "brokerId=1", "namesrv.enabled=false",
                 "flushDelayOffsetInterval=100")
    slave.broker.settings = tuple(s for s in slave.broker.settings if not s.startswith("namesrvAddr=")) + (
        f"haMasterAddress=127.0.0.1:{master.ha_port}",)
    master.broker.start()
    slave.broker.start()
    try:
        results = asyncio.run(send_delayed(namesrv, 3))
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        # level 1 (1 s): the master delivers all three, its offset records carry the progress
        wait_for(lambda: delay_offsets(master.addr).get("1", 0) >= 3, what="the master's deliveries")
        wait_for(lambda: delay_offsets(slave.addr).get("1", 0) >= 3, what="the slave's table")
        wait_for(lambda: saved(slave.root).get("1", 0) >= 3, what="the slave's delayOffset.json")
        slave.broker.kill()  # SIGKILL: no clean-stop write
        assert saved(slave.root)["1"] >= 3
        slave.broker.start()
        assert delay_offsets(slave.addr)["1"] == delay_offsets(master.addr)["1"]
    finally:
        slave.broker.stop()
        master.broker.stop()
