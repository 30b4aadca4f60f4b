"""SYNC_MASTER + SYNC_FLUSH with a slave, real processes on loopback: every send the
native client sees acknowledged is on the slave, whose CommitLog is byte-identical to the
master's; a killed slave makes sends answer SLAVE_NOT_AVAILABLE (the message kept on the
master), and a restarted one catches up so that sends succeed again."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import orjson

from rocketport.client import Message, Producer
from rocketport.client.message import SendStatus
from rocketport.protocols.remoting import RequestCode
from rocketport.protocols.remoting.bodies import KVTable, decode_body
from tests.ha.cluster import SEGMENT, log_digest, log_end, master_and_slave, wait_for
from tests.support.processes import REPO
from tests.support.remoting import remoting_client, request

TOPIC = "HaTopic"


def runtime(addr: str) -> dict[str, str]:
    async def ask() -> dict[str, str]:
        async with remoting_client(addr) as conn:
            resp = await conn.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
            return decode_body(KVTable, resp.body).table
    try:
        return asyncio.run(ask())
    except Exception:  # noqa: BLE001 - not up yet: the poll asks again
        return {}


def in_sync(master_addr: str) -> bool:
    return runtime(master_addr).get("haInSyncSlaves", "0") != "0"


async def send_all(namesrv: str, bodies: list[bytes]) -> list:
    async with Producer(namesrv, "ha-producer", retry_times_when_send_failed=0) as producer:
        return [await producer.send(Message(TOPIC, body)) for body in bodies]


def test_acknowledged_sends_are_on_the_slave_byte_identical(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv)
    master.broker.start()
    slave.broker.start()  # learns the master's HA address from the name server
    try:
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")
        results = asyncio.run(send_all(namesrv, [b"m%05d" % i * 600 for i in range(1000)]))
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        listed = subprocess.run([sys.executable, "-m", "rocketport", "admin", "clusterList", "-n", namesrv,
                                 "--output", "json"], capture_output=True, text=True, timeout=60, cwd=REPO)
        rows = {row["brokerId"]: row for row in orjson.loads(listed.stdout)}
        assert rows[0]["role"] == "SYNC_MASTER" and rows[0]["ha"].startswith("1/1 slaves in sync"), rows
        assert rows[1]["role"] == "SLAVE" and rows[1]["ha"].startswith("offset "), rows
        slave_info = runtime(slave.addr)
        assert slave_info["brokerRole"] == "SLAVE"
        assert slave_info["haSlaveConnected"] == "true"
        assert slave_info["haMasterAddress"] == f"127.0.0.1:{master.ha_port}"
    finally:
        slave.broker.stop()  # first: it holds what SYNC_MASTER acknowledged, no more
        master.broker.stop()
    last = max(int(r.offset_msg_id[-16:], 16) for r in results)
    end = log_end(master.root)
    assert log_end(slave.root) == end > last > 3 * SEGMENT  # 1000 records of 3.7 KB: four segments
    assert log_digest(slave.root, end) == log_digest(master.root, end)


def test_a_killed_slave_answers_slave_not_available_and_a_restarted_one_catches_up(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv)
    master.broker.start()
    slave.broker.start()
    try:
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")
        assert {r.status for r in asyncio.run(send_all(namesrv, [b"before"] * 50))} == {SendStatus.SEND_OK}
        slave.broker.kill()
        wait_for(lambda: not in_sync(master.addr), what="the master to see the slave gone")
        alone = asyncio.run(send_all(namesrv, [b"alone-%d" % i for i in range(20)]))
        assert {r.status for r in alone} == {SendStatus.SLAVE_NOT_AVAILABLE}
        assert all(r.queue_offset >= 0 and r.offset_msg_id for r in alone)  # stored all the same
        slave.broker.start()  # recovers its torn tail, resumes from its own end
        wait_for(lambda: in_sync(master.addr), what="the restarted slave in sync")
        after = asyncio.run(send_all(namesrv, [b"after"] * 50))
        assert {r.status for r in after} == {SendStatus.SEND_OK}
    finally:
        slave.broker.stop()
        master.broker.stop()
    end = log_end(master.root)
    assert log_end(slave.root) == end
    assert log_digest(slave.root, end) == log_digest(master.root, end)
