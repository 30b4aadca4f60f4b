"""Replication on /metrics and /api/overview, real processes: a name server, an ASYNC_MASTER
and its SLAVE, each with its HTTP listener. Once what was sent is replicated the master
shows its slave with the acknowledged offset at its log end, nothing behind and in sync;
the slave shows itself connected with nothing behind."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from rocketport.client import Message, Producer
from rocketport.client.message import SendStatus
from tests.ha.cluster import node, wait_for
from tests.ha.conftest import namesrv  # noqa: F401  (the fixture)
from tests.support.remoting import free_port


def get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return answer.read()


def overview(port: int) -> dict:
    try:
        return json.loads(get(port, "/api/overview"))
    except OSError:
        return {}


def samples(port: int) -> dict[tuple[str, str], float]:
    """Replication samples by (name, slave label or "")."""
    out = {}
    for family in text_string_to_metric_families(get(port, "/metrics").decode()):
        if family.name.startswith("rocketport_ha_"):
            for sample in family.samples:
                out[(sample.name, sample.labels.get("slave", ""))] = sample.value
    return out


async def send(namesrv: str, count: int) -> None:
    async with Producer(namesrv, "rows-producer") as producer:
        for i in range(count):
            assert (await producer.send(Message("RowsTopic", b"row-%d" % i))).status == SendStatus.SEND_OK


def test_master_and_slave_show_their_replication(tmp_path, namesrv):
    master_http, slave_http = free_port(), free_port()
    master = node(tmp_path, "master", namesrv, "brokerRole=ASYNC_MASTER", "http.enabled=true",
                  f"http.port={master_http}")
    slave = node(tmp_path, "slave", namesrv, "brokerRole=SLAVE", "brokerId=1", "http.enabled=true",
                 f"http.port={slave_http}")
    master.broker.start()
    slave.broker.start()
    try:
        asyncio.run(send(namesrv, 20))
        end = overview(master_http)["store"]["commitLogMaxOffset"]

        def replicated() -> dict | None:
            rows = overview(master_http).get("replication") or {}
            slaves = rows.get("slaves") or []
            return rows if slaves and slaves[0]["ackOffset"] == end and slaves[0]["inSync"] else None
        rows = wait_for(replicated, what="the slave acknowledging the master's log end")
        [row] = rows["slaves"]
        assert rows["role"] == "ASYNC_MASTER" and row["behindBytes"] == 0
        on_master = samples(master_http)
        assert on_master[("rocketport_ha_slave_ack_offset", row["address"])] == end
        assert on_master[("rocketport_ha_slave_behind_bytes", row["address"])] == 0
        assert on_master[("rocketport_ha_slave_in_sync", row["address"])] == 1

        mine = wait_for(lambda: (o := overview(slave_http).get("replication")) and o["behindBytes"] == 0 and o,
                        what="the slave at its master's end")
        assert mine["role"] == "SLAVE" and mine["connected"] and mine["offset"] == end
        on_slave = samples(slave_http)
        assert on_slave[("rocketport_ha_connected", "")] == 1
        assert on_slave[("rocketport_ha_behind_bytes", "")] == 0
    finally:
        slave.broker.stop()
        master.broker.stop()
