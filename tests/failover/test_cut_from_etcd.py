"""A master cut off from etcd (its etcd connections go through a proxy the test cuts) while
it stays reachable by clients and slaves: it refuses writes before its lease can expire,
a slave is elected and takes the writes; when the cut heals, the old master follows the
new one as a slave. Every acknowledged send is read back once, the logs agree."""

from __future__ import annotations

import asyncio

import pytest

from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from tests.failover.cluster import (TTL_S, group_node, in_sync_set, join_slaves, leader_id, read_all,
                                    send_many, send_until_acked, wait_caught_up)
from tests.ha.cluster import log_digest, log_end, wait_for
from tests.support.remoting import remoting_client, request
from tests.support.tcp_proxy import TcpProxy

TOPIC = "CutTopic"


def direct_send_code(addr: str, body: bytes) -> int | None:
    """The response code of one send made straight to the broker at ``addr``."""
    async def send() -> int:
        header = SendMessageRequestHeader("pg", TOPIC, "TBW102", 4, 0, 0, 0, 0, "")
        async with remoting_client(addr) as conn:
            resp = await conn.invoke(request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header),
                                             body), 5)
            return resp.code
    try:
        return asyncio.run(send())
    except Exception:  # noqa: BLE001 - unreachable: no answer
        return None


@pytest.mark.slow  # ~15 s; the frozen master's test covers fencing in the default suite
def test_a_master_cut_from_etcd_fences_itself_and_follows_after_the_cut_heals(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    proxy = TcpProxy(endpoints)
    nodes = [group_node(tmp_path, 1, namesrv, proxy.address)] + \
        [group_node(tmp_path, i, namesrv, endpoints) for i in (2, 3)]
    nodes[0].broker.start()
    try:
        join_slaves(nodes, endpoints)
        acked = send_many(namesrv, TOPIC, [b"before-%04d" % i for i in range(100)])
        assert len(acked) == 100
        proxy.cut()
        wait_for(lambda: leader_id(endpoints) in (2, 3), timeout=10 * TTL_S, what="a new master")
        # the old master, reachable but cut from etcd, takes no write now that another leads
        assert direct_send_code(nodes[0].addr, b"to-the-cut-master") == ResponseCode.SERVICE_NOT_AVAILABLE
        sent = set(acked) | {b"to-the-cut-master"}
        send_until_acked(namesrv, TOPIC, (b"after-%04d" % i for i in range(10_000)), sent, acked, 10 * TTL_S)
        new = leader_id(endpoints)
        proxy.restore()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=10 * TTL_S,
                 what="the old master back in sync as a slave")
        assert leader_id(endpoints) == new
        read = read_all(namesrv, TOPIC, "cut-reader", acked)
        assert set(acked) <= set(read) <= sent and len(read) == len(set(read))
        held = wait_caught_up(nodes, nodes[new - 1])
    finally:
        for n in nodes:
            n.broker.stop()
        proxy.close()
    master = nodes[new - 1]
    for n in nodes:  # the same bytes up to what all held before the stop
        assert log_end(n.root) >= held
        assert log_digest(n.root, held) == log_digest(master.root, held)
