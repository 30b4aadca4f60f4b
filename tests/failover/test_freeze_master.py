"""A master frozen (SIGSTOP) for longer than its lease, with a write waiting in its socket,
then resumed (SIGCONT) after a slave was elected: the waiting write is refused, never
stored as acknowledged (no split brain); the old master steps down and rejoins as a slave;
every send acknowledged before and after is read back once, and the logs agree. The slaves
end a silent HA link after 1 s, so they look for proof of the master's death
(etcdElectOnMasterDeath) again and again while it is frozen: its ports still take connects,
so none is found and the group waits until etcd expires the lease."""

from __future__ import annotations

import signal
import socket
import time

from rocketport.protocols.remoting import RemotingConnection
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.events import CommandReceived
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from tests.failover.cluster import (TTL_S, group_node, in_sync_set, join_slaves, leader_id, leader_lease,
                                    read_all, send_many, send_until_acked, wait_caught_up)
from tests.ha.cluster import log_digest, log_end, wait_for
from tests.support.remoting import frame_bytes, request

TOPIC = "FrozenTopic"


def send_frame(body: bytes) -> bytes:
    header = SendMessageRequestHeader("pg", TOPIC, "TBW102", 4, 0, 0, 0, 0, "")
    return frame_bytes(request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body))


def answer(sock: socket.socket, timeout: float) -> int | None:
    """The response code to the one request sent on ``sock`` (None: closed or no answer)."""
    conn = RemotingConnection()
    sock.settimeout(timeout)
    try:
        while chunk := sock.recv(65536):
            for event in conn.receive_data(chunk):
                if isinstance(event, CommandReceived):
                    return event.command.code
    except OSError:
        pass
    return None


def test_a_master_resumed_after_its_successor_was_elected_accepts_no_write(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    nodes = [group_node(tmp_path, 1, namesrv, endpoints)] + \
        [group_node(tmp_path, i, namesrv, endpoints, "haHousekeepingInterval=1000") for i in (2, 3)]
    one = nodes[0]
    one.broker.start()
    try:
        join_slaves(nodes, endpoints)
        acked = send_many(namesrv, TOPIC, [b"before-%04d" % i for i in range(100)])
        assert len(acked) == 100
        one.broker.proc.send_signal(signal.SIGSTOP)
        _, left = leader_lease(endpoints)  # etcd's clock: the frozen master's lease ends no sooner
        asked = time.monotonic()
        stale = socket.create_connection(("127.0.0.1", one.port), timeout=5)
        try:
            stale.sendall(send_frame(b"written-to-the-frozen-master"))  # waits in its socket
            wait_for(lambda: leader_id(endpoints) in (2, 3), timeout=10 * TTL_S, what="a new master")
            replaced_after = time.monotonic() - asked
            sent = set(acked)
            send_until_acked(namesrv, TOPIC, (b"after-%04d" % i for i in range(10_000)), sent, acked, 10 * TTL_S)
            one.broker.proc.send_signal(signal.SIGCONT)
            code = answer(stale, 10)
        finally:
            one.broker.proc.send_signal(signal.SIGCONT)
            stale.close()
        assert replaced_after >= left - 1  # not taken for dead: replaced once its lease ran out
        assert code == ResponseCode.SERVICE_NOT_AVAILABLE  # refused: the lease ran out while frozen
        new = leader_id(endpoints)
        more = [b"more-%04d" % i for i in range(50)]
        sent.update(more)
        acked += send_many(namesrv, TOPIC, more)
        read = read_all(namesrv, TOPIC, "frozen-reader", acked)
        assert set(acked) <= set(read) <= sent and len(read) == len(set(read))
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=10 * TTL_S,
                 what="the old master back in sync as a slave")
        assert leader_id(endpoints) == new
        held = wait_caught_up(nodes, nodes[new - 1])
    finally:
        for n in nodes:
            n.broker.stop()
    # the slaves did look for proof of death, and found the frozen master's ports answering
    assert any("no proof it died" in n.broker.log.read_text() for n in nodes[1:])
    master = nodes[new - 1]
    for n in nodes:  # the same bytes up to what all held before the stop
        assert log_end(n.root) >= held
        assert log_digest(n.root, held) == log_digest(master.root, held)
