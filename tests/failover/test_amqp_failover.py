"""pika through a failover on etcd: a group of three (controllerMode etcd, SYNC_MASTER), each
node with its AMQP port. Publishes with confirms to a durable queue on the master; the master
is SIGKILLed; the publisher goes to the other nodes in turn until one confirms (the elected
one: a slave refuses); every confirmed message is then read back once from the new master,
the queue declared on the old one included (the replicated metadata log)."""

from __future__ import annotations

import time

import pika
import pytest

from tests.failover.cluster import TTL_S, group_node, join_slaves, leader_id
from tests.ha.cluster import wait_for
from tests.support.remoting import free_port

QUEUE = "failover-q"


def publish(ports: list[int], bodies: list[bytes]) -> list[bytes]:
    """``bodies`` published with confirms through the first node of ``ports`` that takes a
    connection; the confirmed ones (stops at the first refusal)."""
    confirmed: list[bytes] = []
    params = [pika.ConnectionParameters("127.0.0.1", p, connection_attempts=1, socket_timeout=5,
                                        blocked_connection_timeout=10) for p in ports]
    try:
        connection = pika.BlockingConnection(params)
    except pika.exceptions.AMQPError:
        return confirmed
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        for body in bodies:
            # raises unless confirmed, and unless routed (a node that does not know the queue yet)
            channel.basic_publish("", QUEUE, body, pika.BasicProperties(delivery_mode=2), mandatory=True)
            confirmed.append(body)
    except pika.exceptions.AMQPError:
        pass
    finally:
        if connection.is_open:
            try:
                connection.close()
            except pika.exceptions.AMQPError:
                pass
    return confirmed


def drain(port: int, wanted: set[bytes], timeout_s: float) -> list[bytes]:
    """Every message of the queue on the node at ``port`` (acknowledged as read): until all of
    ``wanted`` came or the time is up, then until the queue answers empty."""
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, socket_timeout=5))
    read: list[bytes] = []
    try:
        channel = connection.channel()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            method, _, body = channel.basic_get(QUEUE, auto_ack=True)
            if method is None:
                if wanted <= set(read):
                    break
                time.sleep(0.2)
                continue
            read.append(body)
    finally:
        connection.close()
    return read


@pytest.mark.slow  # ~15 s: the native kill test and the soak cover the election in the default suite
def test_pika_confirms_survive_a_failover_each_confirmed_message_read_once(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    amqp = {i: free_port() for i in (1, 2, 3)}
    nodes = {i: group_node(tmp_path, i, namesrv, endpoints, f"amqp.port={amqp[i]}") for i in (1, 2, 3)}
    nodes[1].broker.start()
    try:
        join_slaves(list(nodes.values()), endpoints)
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp[1]))
        connection.channel().queue_declare(QUEUE, durable=True)
        connection.close()
        confirmed = publish([amqp[1]], [b"before-%04d" % i for i in range(200)])
        assert len(confirmed) == 200
        sent = set(confirmed)
        nodes[1].broker.kill()
        tries = iter(range(10_000))

        def one_confirmed() -> bool:
            body = b"retry-%04d" % next(tries)
            sent.add(body)
            got = publish([amqp[2], amqp[3]], [body]) or publish([amqp[3], amqp[2]], [body])
            confirmed.extend(got)
            return bool(got)
        wait_for(one_confirmed, timeout=10 * TTL_S + 30, what="a publish confirmed by the new master")
        new = leader_id(endpoints)
        assert new in (2, 3)
        after = [b"after-%04d" % i for i in range(100)]
        sent.update(after)
        confirmed += publish([amqp[new]], after)
        read = drain(amqp[new], set(confirmed), 30)
        assert set(confirmed) <= set(read) <= sent  # every confirmed message, nothing made up
        assert len(read) == len(set(read))  # each once
    finally:
        for n in nodes.values():
            n.broker.stop()
