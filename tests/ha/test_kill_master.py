"""Two masters with a slave each (conf/2m-2s-sync's shape), a name server, real processes and
real clients: the native client, confluent-kafka (acks=all) and pika (confirms) produce to
both groups; a consumer group reads part and commits; broker-a's master is SIGKILLed while
the native producer is mid-stream. Sends carry on to broker-b (the native producer retries
another broker; the Kafka producer bootstrapped at broker-b and pika reconnecting to its
next host go on), and the same consumer group, started again, reads broker-a's messages from
its slave starting at the committed offsets (the slave has them through the replicated
offset log, which the test waits for, as docs/operations.md says a commit of the last 100 ms
may be re-read).

SYNC_MASTER: the union of what the group read holds every acknowledged message, and nothing
read before the kill is read again. ASYNC_MASTER (slow): the acknowledged messages missing
are counted and printed (its loss window, docs/operations.md), not asserted zero."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pika
import pytest
from confluent_kafka import Producer as KafkaProducer

from rocketport.client import AdminClient, ConsumeResult, Message, Producer, PushConsumer
from rocketport.client.message import SendStatus
from rocketport.protocols.remoting import RequestCode, ResponseCode
from tests.ha.cluster import Node, master_and_slave, wait_for
from tests.ha.test_slave_reads import cluster_info, topics_of
from tests.ha.test_sync_master import in_sync
from tests.support.remoting import free_port, remoting_client, request

TOPIC = "KillMaster"
GROUP = "kill-readers"
QUEUES = 4


def kafka_send(port: int, values: list[bytes]) -> list[bytes]:
    """``values`` produced with acks=all to the broker at ``port``: the acknowledged ones."""
    acked: list[bytes] = []
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "retries": 0,
                              "enable.idempotence": False, "message.timeout.ms": 20000, "linger.ms": 5})
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    assert producer.flush(30) == 0
    return acked


def amqp_send(ports: list[int], values: list[bytes]) -> list[bytes]:
    """``values`` published with confirms to the first AMQP broker of ``ports`` that accepts a
    connection (pika tries them in turn): the confirmed ones."""
    params = [pika.ConnectionParameters("127.0.0.1", p, connection_attempts=1, socket_timeout=5) for p in ports]
    connection = pika.BlockingConnection(params)
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.exchange_declare(TOPIC, "fanout")
        for value in values:
            channel.basic_publish(TOPIC, "", value)  # raises unless confirmed
        return list(values)
    finally:
        connection.close()


async def group_offsets(addr: str) -> list[int]:
    async with remoting_client(addr) as conn:
        answers = [await conn.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(q)}), 5) for q in range(QUEUES)]
    return [int(a.ext_fields["offset"]) if a.code == ResponseCode.SUCCESS else -1 for a in answers]


async def consume_until(namesrv: str, wanted: set[bytes], timeout: float) -> list:
    """A member of GROUP started anew, consuming until it has read ``wanted`` (or ``timeout``
    passes), then shut down (committing its offsets): every message it read."""
    got: list = []
    arrived = asyncio.Event()

    async def listener(msgs) -> ConsumeResult:
        got.extend(msgs)
        if wanted <= {m.body for m in got}:
            arrived.set()
        return ConsumeResult.SUCCESS
    consumer = PushConsumer(GROUP, namesrv, consume_from="first", rebalance_interval_s=1.0)
    consumer.subscribe(TOPIC)
    consumer.register(listener)
    await consumer.start()
    try:
        await asyncio.wait_for(arrived.wait(), timeout)
    except TimeoutError:
        pass  # the caller's assertion says what is missing
    finally:
        await consumer.shutdown()
    return got


class NativeStream:
    """The native producer sending ``native-<n>`` without pause in a task until stopped;
    what it saw acknowledged (SEND_OK) and what failed."""

    def __init__(self, producer: Producer) -> None:
        self.producer, self.acked, self.failed = producer, [], 0
        self.stopping = False
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        n = 0
        while not self.stopping:
            body = b"native-%d" % n
            n += 1
            try:
                result = await self.producer.send(Message(TOPIC, body))
            except Exception:  # noqa: BLE001 - a send lost with the master: counted, not acknowledged
                self.failed += 1
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked.append(body)

    async def until(self, count: int) -> None:
        for _ in range(600):
            if len(self.acked) >= count or self.task.done():
                return
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.stopping = True
        await self.task


def start_groups(tmp_path, namesrv: str, role: str) -> tuple[dict[str, tuple[Node, Node]], dict[str, int]]:
    groups, amqp = {}, {}
    for name in ("broker-a", "broker-b"):
        master, slave = master_and_slave(tmp_path, namesrv, role=role, flush="SYNC_FLUSH", kafka=True, name=name)
        amqp[name] = free_port()
        master.broker.settings += (f"amqp.port={amqp[name]}",)
        groups[name] = (master, slave)
    return groups, amqp


def kill_master_mid_stream(tmp_path, namesrv: str, role: str) -> dict:
    groups, amqp = start_groups(tmp_path, namesrv, role)
    (a, a_slave), (b, b_slave) = groups["broker-a"], groups["broker-b"]
    started: list[Node] = []
    try:
        for n in (a, a_slave, b, b_slave):
            n.broker.start()
            started.append(n)
        wait_for(lambda: in_sync(a.addr) and in_sync(b.addr), what="both slaves in sync")

        async def before_the_kill() -> tuple[list[bytes], list]:
            async with AdminClient(namesrv) as admin:
                await admin.create_topic(TOPIC, queue_nums=QUEUES)
            acked = kafka_send(a.kafka_port, [b"kafka-a-%d" % i for i in range(30)])
            acked += kafka_send(b.kafka_port, [b"kafka-b-%d" % i for i in range(30)])
            acked += await asyncio.to_thread(amqp_send, [amqp["broker-a"]], [b"amqp-a-%d" % i for i in range(30)])
            async with Producer(namesrv, "kill-native") as producer:
                results = [await producer.send(Message(TOPIC, b"first-%d" % i)) for i in range(100)]
            acked += [b"first-%d" % i for i, r in enumerate(results) if r.status is SendStatus.SEND_OK]
            return acked, await consume_until(namesrv, set(acked), 60)
        first_acked, first_read = asyncio.run(before_the_kill())
        assert {m.body for m in first_read} >= set(first_acked)
        if role == "SYNC_MASTER":
            assert len(first_acked) == 190
        # the slave knows the topic (SlaveSynchronize's copy, within 10 s)
        wait_for(lambda: TOPIC in asyncio.run(topics_of(a_slave.addr)), timeout=20, what="the topic on the slave")
        # the slave holds the group's committed offsets (the replicated offset log)
        committed = asyncio.run(group_offsets(a.addr))
        assert min(committed) > 0
        wait_for(lambda: asyncio.run(group_offsets(a_slave.addr)) == committed, what="offsets on the slave")
        second_acked = kafka_send(a.kafka_port, [b"kafka-a2-%d" % i for i in range(30)])
        second_acked += amqp_send([amqp["broker-a"]], [b"amqp-a2-%d" % i for i in range(30)])

        async def through_the_kill() -> tuple[list[bytes], int, list]:
            async with Producer(namesrv, "kill-native") as producer:
                stream = NativeStream(producer)
                await stream.until(100)
                a.broker.kill()  # mid-stream: the native producer has sends in flight
                sent_at_kill = len(stream.acked)
                await stream.until(sent_at_kill + 100)  # carries on to broker-b
                await stream.stop()
            assert len(stream.acked) >= sent_at_kill + 100
            addrs = (await cluster_info(namesrv)).broker_addr_table["broker-a"].broker_addrs
            assert addrs == {1: a_slave.addr}  # the killed master is gone from the route
            acked = list(stream.acked)
            acked += kafka_send(b.kafka_port, [b"kafka-b3-%d" % i for i in range(30)])
            acked += await asyncio.to_thread(amqp_send, [amqp["broker-a"], amqp["broker-b"]],
                                             [b"amqp-b3-%d" % i for i in range(30)])
            return acked, stream.failed, await consume_until(namesrv, set(acked) | set(second_acked), 90)
        third_acked, failed, second_read = asyncio.run(through_the_kill())
    finally:
        for n in reversed(started):
            if n is not a:
                n.broker.stop()
        if a.broker.proc is not None and a.broker.proc.poll() is None:
            a.broker.stop()
    acked = set(first_acked) | set(second_acked) | set(third_acked)
    read = Counter(m.body for m in first_read + second_read)
    return {"acked": acked, "read": read, "first_read": first_read, "second_read": second_read,
            "first_acked": first_acked, "second_acked": second_acked, "third_acked": third_acked,
            "failed": failed}


def test_a_sync_master_killed_mid_stream_loses_no_acknowledged_message(tmp_path, namesrv):
    seen = kill_master_mid_stream(tmp_path, namesrv, "SYNC_MASTER")
    acked, read = seen["acked"], seen["read"]
    assert acked - set(read) == set()  # nothing acknowledged lost
    again = {m.body for m in seen["second_read"]} & {m.body for m in seen["first_read"]}
    assert again == set()  # the group resumed at its committed offsets, on the slave too
    from_slave = {m.body for m in seen["second_read"] if m.broker_name == "broker-a"}
    assert set(seen["second_acked"]) <= from_slave  # broker-a's acknowledged messages, read from its slave
    duplicates = sum(n - 1 for n in read.values() if n > 1)  # a send retried after the kill: allowed
    print(json.dumps({"case": "sync_master_kill", "acked": len(acked), "duplicates": duplicates,
                      "failed_sends": seen["failed"]}))


@pytest.mark.slow
def test_an_async_master_killed_mid_stream_loses_what_it_had_not_streamed(tmp_path, namesrv):
    seen = kill_master_mid_stream(tmp_path, namesrv, "ASYNC_MASTER")
    acked, read = seen["acked"], seen["read"]
    lost = acked - set(read)
    # the loss is a window around the kill: only sends of the stream the kill cut
    assert lost <= {body for body in seen["third_acked"] if body.startswith(b"native-")}
    print(json.dumps({"case": "async_master_kill", "acked": len(acked), "lost": len(lost),
                      "lost_bodies": sorted(b.decode() for b in lost)[:20]}))
