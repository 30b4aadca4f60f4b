"""A broker group under an etcd election on loopback for the failover tests: nodes built by
tests.ha.cluster.node (real processes, fixed free ports, restartable), every one configured
alike with controllerMode etcd; the election's keys read straight from etcd."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from confluent_kafka import Consumer
from confluent_kafka import Producer as KafkaProducer

from rocketport.client import Message, MessageQueue, Producer, PullConsumer
from rocketport.client.message import SendStatus
from rocketport.core.ha.etcd_client import EtcdClient, EtcdError
from tests.ha.cluster import Node, node, wait_for
from tests.ha.test_sync_master import runtime

PREFIX = "/rocketport/DefaultCluster/broker-a/"
TTL_S = 3  # etcdLeaseTtl in these tests: a dead master holds the group at most this long


def group_node(base: Path, broker_id: int, namesrv: str, endpoints: str, *settings: str,
               kafka: bool = False) -> Node:
    return node(base, f"node{broker_id}", namesrv, f"brokerId={broker_id}", "brokerRole=SYNC_MASTER",
                "controllerMode=etcd", f"etcdEndpoints={endpoints}", f"etcdLeaseTtl={TTL_S}",
                "etcdCheckInterval=200", "haMaxTimeSlaveNotCatchup=3000", *settings, kafka=kafka)


def etcd_key(endpoints: str, name: str):
    """The decoded JSON value of the group's key ``name`` (None when absent). Asked again
    for up to 5 s while etcd answers an error (503 "leader changed" while etcd itself
    elects a leader, after one of its nodes was killed)."""
    async def get():
        client = EtcdClient(endpoints.split(","))
        try:
            for attempt in range(50):
                try:
                    kv = await client.get((PREFIX + name).encode())
                    return orjson.loads(kv.value) if kv is not None else None
                except EtcdError:
                    if attempt == 49:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            await client.close()
    return asyncio.run(get())


def leader_lease(endpoints: str) -> tuple[int, int]:
    """The leader key's lease id and the seconds etcd says that lease has left (its clock)."""
    async def get():
        client = EtcdClient(endpoints.split(","))
        try:
            kv = await client.get((PREFIX + "leader").encode())
            assert kv is not None
            left = await client.call("lease/timetolive", {"ID": str(kv.lease)})
            return kv.lease, int(left.get("TTL", -1))
        finally:
            await client.close()
    return asyncio.run(get())


def leader_id(endpoints: str) -> int | None:
    leader = etcd_key(endpoints, "leader")
    return leader["broker_id"] if leader else None


def in_sync_set(endpoints: str) -> list[int]:
    value = etcd_key(endpoints, "syncStateSet")
    return value["members"] if value else []


def send_one(namesrv: str, topic: str, body: bytes) -> SendStatus | None:
    """One send through a fresh producer (fresh routes); None when it raised."""
    async def send():
        async with Producer(namesrv, "failover-producer", retry_times_when_send_failed=0,
                            send_timeout_s=3.0) as producer:
            return (await producer.send(Message(topic, body))).status
    try:
        return asyncio.run(asyncio.wait_for(send(), 10))
    except Exception:  # noqa: BLE001 - no master yet, or the old one refusing: the caller retries
        return None


def join_slaves(nodes: list[Node], endpoints: str) -> None:
    """Once the first node (brokerId 1, started alone) leads, start the others and wait
    until all three are in the in-sync set: the group as the failover tests begin."""
    wait_for(lambda: leader_id(endpoints) == 1, what="node 1 elected")
    for n in nodes[1:]:
        n.broker.start()
    wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], what="the slaves in the in-sync set")


@contextmanager
def kafka_group(base: Path, namesrv: str, endpoints: str, topic: str) -> Iterator[list[Node]]:
    """The Kafka failover tests' group: three nodes with Kafka on, node 1 elected and the
    others in its in-sync set, ``topic`` made by one native send ("native", on every
    node); every node stopped at the end."""
    nodes = [group_node(base, i, namesrv, endpoints, kafka=True) for i in (1, 2, 3)]
    nodes[0].broker.start()
    try:
        join_slaves(nodes, endpoints)
        assert send_many(namesrv, topic, [b"native"]) == [b"native"]
        yield nodes
    finally:
        for n in nodes:
            n.broker.stop()


def wait_caught_up(nodes: list[Node], master: Node) -> int:
    """The master's CommitLog end once every node's log ends there: what every node holds
    before the stop, where the logs are compared byte for byte (a master's clean stop may
    write one more record, such as the consumer offsets', after a slave already stopped)."""
    def caught_up() -> int:
        end = runtime(master.addr).get("commitLogMaxOffset")
        same = end is not None and all(runtime(n.addr).get("commitLogMaxOffset") == end for n in nodes)
        return int(end) if same else 0
    return wait_for(caught_up, timeout=30, what="every node's log ending where the master's does")


def send_until_acked(namesrv: str, topic: str, bodies: Iterator[bytes], sent: set[bytes],
                     acked: list[bytes], timeout: float) -> None:
    """Send the next of ``bodies`` (a fresh producer each) until one is acknowledged, as
    through an election with no master for a while. Every body tried goes to ``sent`` (a
    send that raised may still be stored), the acknowledged one to ``acked``."""
    def once() -> bool:
        body = next(bodies)
        sent.add(body)
        if send_one(namesrv, topic, body) is SendStatus.SEND_OK:
            acked.append(body)
            return True
        return False
    wait_for(once, timeout=timeout, what="a send acknowledged by the new master")


def send_many(namesrv: str, topic: str, bodies: list[bytes]) -> list[bytes]:
    """Send each body; the ones acknowledged SEND_OK."""
    async def send():
        acked = []
        async with Producer(namesrv, "failover-producer", retry_times_when_send_failed=0,
                            send_timeout_s=3.0) as producer:
            for body in bodies:
                try:
                    if (await producer.send(Message(topic, body))).status is SendStatus.SEND_OK:
                        acked.append(body)
                except Exception:  # noqa: BLE001 - not acknowledged: not counted
                    pass
        return acked
    return asyncio.run(send())


def read_all(namesrv: str, topic: str, group: str, wanted: list[bytes], timeout_s: float = 30) -> list[bytes]:
    """Every body of ``topic`` from the start: polled until all of ``wanted`` came (or the
    time is up), then until a poll finds nothing more (so duplicates show)."""
    async def read():
        bodies: list[bytes] = []
        async with PullConsumer(group, namesrv, consume_from="first") as consumer:
            queues: list[MessageQueue] = await consumer.queues(topic)
            consumer.assign(queues)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            missing = set(wanted)
            while missing and loop.time() < deadline:
                batch = [bytes(m.body) for m in await consumer.poll(0.5, 256)]
                bodies.extend(batch)
                missing.difference_update(batch)
            for _ in range(1000):  # bounded: a poll finds nothing within 0.5 s long before
                batch = [bytes(m.body) for m in await consumer.poll(0.5, 256)]
                if not batch:
                    break
                bodies.extend(batch)
        return bodies
    return asyncio.run(read())


def poll_until(consumer: Consumer, read: list[bytes], wanted: int, timeout_s: float) -> None:
    """Poll ``consumer`` into ``read`` until it holds ``wanted`` values or the time is up."""
    deadline = time.monotonic() + timeout_s
    while len(read) < wanted and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            read.append(msg.value())


def idempotent_producer(bootstrap: str) -> KafkaProducer:
    """confluent-kafka as the failover tests run it: idempotent, acks=all, patient."""
    return KafkaProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "message.timeout.ms": 60_000, "linger.ms": 5})


@dataclass(slots=True)
class Deliveries:
    """A producer's delivery reports: what was acknowledged, and the errors of the rest."""
    acked: list[bytes]
    failed: list[str] = field(default_factory=list)

    def report(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.failed.append(str(err))
