"""The AMQP front-end asks for its node's role at each publish: a pika connection opened to
a slave of an etcd group (controllerMode etcd) has its publishes nacked while the node is a
slave, and the same channel's publishes confirmed once the node is elected (its master
stopped), into the queue declared on the old master; what was nacked is nowhere."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pika
import pytest
from pika.exceptions import NackError

from tests.failover.cluster import group_node, in_sync_set, leader_id
from tests.ha.cluster import wait_for
from tests.parity.amqp_client import drain
from tests.support.remoting import free_port

QUEUE = "promoted-q"


@contextmanager
def amqp_pair(base: Path, namesrv: str, endpoints: str, *settings: str) -> Iterator[tuple]:
    """(node 1, node 2, their AMQP ports by brokerId, the test's pika connections): node 1
    elected alone, then node 2 in its in-sync set; at the end the connections closed (one
    on a killed node may fail to) and both nodes stopped."""
    amqp = {i: free_port() for i in (1, 2)}
    one, two = (group_node(base, i, namesrv, endpoints, *settings, f"amqp.port={amqp[i]}") for i in (1, 2))
    one.broker.start()
    connections: list[pika.BlockingConnection] = []
    try:
        wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected (alone)")
        two.broker.start()
        wait_for(lambda: in_sync_set(endpoints) == [1, 2], what="node 2 in the in-sync set")
        yield one, two, amqp, connections
    finally:
        for conn in connections:
            if conn.is_open:
                try:
                    conn.close()
                except pika.exceptions.AMQPError:  # on a node killed under it
                    pass
        two.broker.stop()
        one.broker.stop()


def test_a_publish_on_a_slave_is_nacked_until_the_node_is_elected(tmp_path, etcd, namesrv):
    endpoints = etcd.endpoints
    # ASYNC_MASTER: a SYNC_MASTER alone would nack (and store) for want of a slave in sync
    with amqp_pair(tmp_path, namesrv, endpoints, "brokerRole=ASYNC_MASTER") as (one, two, amqp, connections):
        on_one = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp[1]))
        connections.append(on_one)
        first = on_one.channel()
        first.confirm_delivery()
        first.queue_declare(QUEUE, durable=True)
        first.basic_publish("", QUEUE, b"on the first master")

        on_two = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp[2]))
        connections.append(on_two)
        channel = on_two.channel()
        channel.confirm_delivery()
        with pytest.raises(NackError):
            channel.basic_publish("", QUEUE, b"to the slave")
        on_one.close()
        one.broker.stop()  # its lease is let go: node 2 is elected
        wait_for(lambda: leader_id(endpoints) == 2, what="node 2 elected")
        deadline = time.monotonic() + 10
        while True:  # the same channel, once the node has taken up what it applied
            try:
                channel.basic_publish("", QUEUE, b"to the new master")
                break
            except NackError:
                assert time.monotonic() < deadline, "never confirmed by the new master"
                on_two.sleep(0.1)
        assert drain(channel, QUEUE) == [b"on the first master", b"to the new master"]


def test_a_queue_bound_just_before_its_master_dies_keeps_what_was_routed_to_it(tmp_path, etcd, namesrv):
    """A durable queue bound to an exchange whose topic already holds messages starts there at
    the topic's end. The master writes that start into the replicated log with the binding,
    before anything routed after it; so a slave promoted a few milliseconds after the first
    confirmed publish starts the queue there too, and holds that publish (starting at the
    topic's end on the new master, as before, skipped it: the offsets' 100 ms record had not
    been written yet)."""
    endpoints = etcd.endpoints
    # SYNC_MASTER: a publish is confirmed once the slave has it
    with amqp_pair(tmp_path, namesrv, endpoints) as (one, two, amqp, connections):
        on_one = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp[1]))
        connections.append(on_one)
        channel = on_one.channel()
        channel.confirm_delivery()
        channel.exchange_declare("late-x", "direct", durable=True)
        channel.queue_declare("early-q", durable=True)
        channel.queue_bind("early-q", "late-x", "k")
        for i in range(20):  # the exchange's topic holds these before the late queue is bound
            channel.basic_publish("late-x", "k", b"before-%d" % i)
        on_one.sleep(0.5)  # every record of the interval written
        channel.queue_declare("late-q", durable=True)
        channel.queue_bind("late-q", "late-x", "k")
        channel.basic_publish("late-x", "k", b"routed after the bind")
        one.broker.kill()  # within the offsets' interval after the bind
        wait_for(lambda: leader_id(endpoints) == 2, what="node 2 elected")
        on_two = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp[2]))
        connections.append(on_two)
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:  # the queue is live once node 2 took it up
            try:
                got = drain(on_two.channel(), "late-q")
            except pika.exceptions.ChannelClosed:
                pass
            if not got:
                on_two.sleep(0.2)
        assert got == [b"routed after the bind"]
