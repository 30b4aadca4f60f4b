"""One store for every protocol: messages cross between the Kafka front-end and the facade."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from rocketport.common.batch import iter_records
from rocketport.common.message import Message
from rocketport.core.config import ProtocolConfig
from rocketport.core.filter import compile_filter
from rocketport.core.store.record import HEADER_SIZE, I32, POS_BODY_LENGTH
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.handlers import SUBSCRIPTION_FLAG, SUSPEND_FLAG
from rocketport.protocols.remoting.messages import decode_message_ext_records
from tests.support.live_broker import LiveBroker

TIMEOUT_S = 20


def create_topic(live: LiveBroker, name: str, partitions: int = 1) -> None:
    live.run(lambda: live.server.broker.create_topic(name, read_queue_nums=partitions,
                                                     write_queue_nums=partitions))


def test_facade_message_consumed_by_kafka_client(live_broker):
    create_topic(live_broker, "x-in")
    broker = live_broker.server.broker
    born = 1_700_000_000_000
    for i in range(3):
        msg = Message("x-in", b"payload-%d" % i, {"KEYS": "order-%d" % i, "TAGS": "TagA", "color": "red"},
                      queue_id=0, born_timestamp=born + i)
        live_broker.call(broker.put_message(msg))
    c = KafkaConsumer(bootstrap_servers=live_broker.bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    c.assign([TopicPartition("x-in", 0)])
    got: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < 3 and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got.extend(records)
    c.close()
    assert [r.offset for r in got] == [0, 1, 2]
    assert [r.value for r in got] == [b"payload-0", b"payload-1", b"payload-2"]
    assert [r.key for r in got] == [b"order-0", b"order-1", b"order-2"]
    assert [r.timestamp for r in got] == [born, born + 1, born + 2]
    headers = dict(got[0].headers)
    assert headers["color"] == b"red"
    assert headers["tag"] == b"TagA"
    assert "KEYS" not in headers and "TAGS" not in headers


def test_kafka_message_read_through_facade(live_broker):
    create_topic(live_broker, "x-out")
    p = KafkaProducer(bootstrap_servers=live_broker.bootstrap, linger_ms=20, compression_type="lz4")
    p.send("x-out", key=b"k-a", value=b"\x00binary\xff", headers=[("tag", b"TagA"), ("bin", b"\x01\x02")],
           partition=0)
    p.send("x-out", key=b"k-b", value=b"second", headers=[("tag", b"TagB")], partition=0)
    p.flush(TIMEOUT_S)
    p.close(TIMEOUT_S)
    broker = live_broker.server.broker

    result = live_broker.run(lambda: broker.get_messages("x-out", 0, 0, 32))
    assert result.message_count == 2
    seg = result.segments[0]
    assert seg.is_inner_batch
    (body_len,) = I32.unpack_from(seg.view, POS_BODY_LENGTH)
    records = list(iter_records(bytes(seg.view[HEADER_SIZE:HEADER_SIZE + body_len])))
    assert [(r.key, r.value) for r in records] == [(b"k-a", b"\x00binary\xff"), (b"k-b", b"second")]
    assert records[0].headers == [("tag", b"TagA"), ("bin", b"\x01\x02")]

    # the tag header became each record's tags code: a TagB subscription skips offset 0
    tag_b = compile_filter("TAG", "TagB")
    filtered = live_broker.run(lambda: broker.get_messages("x-out", 0, 0, 32, message_filter=tag_b))
    assert filtered.message_count == 1
    assert filtered.segments[0].first_offset == 1

    # the key is the record's KEYS: a key look-up finds that record, with its offset
    found = live_broker.run(lambda: broker.query_by_key("x-out", "k-b"))
    assert [(m.body, m.queue_offset, m.tags) for m in found] == [(b"second", 1, "TagB")]


def test_kafka_group_offsets_are_the_shared_offsets(live_broker):
    create_topic(live_broker, "x-off")
    broker = live_broker.server.broker
    live_broker.run(broker.commit_offset, "shared-group", "x-off", 0, 7)
    c = KafkaConsumer(bootstrap_servers=live_broker.bootstrap, group_id="shared-group",
                      enable_auto_commit=False)
    tp = TopicPartition("x-off", 0)
    assert c.committed(tp) == 7
    c.close()


def _remoting_pull(offset: int, *, hold_ms: int = 0) -> object:
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "rg", "topic": "x-txn", "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(SUBSCRIPTION_FLAG | (SUSPEND_FLAG if hold_ms else 0)),
        "commitOffset": "0", "suspendTimeoutMillis": str(hold_ms), "subscription": "*",
        "subVersion": "0", "expressionType": "TAG"})


def test_remoting_consumer_sees_only_committed_kafka_transactions(live_broker):
    """One read rule for every protocol: a remoting consumer of a topic written by a Kafka
    transactional producer stops at the last stable offset, never sees an aborted or open
    transactional record nor a marker, and a held pull is answered by the commit."""
    create_topic(live_broker, "x-txn")
    p = ConfluentProducer({"bootstrap.servers": live_broker.bootstrap, "transactional.id": "x-txn-1"})
    p.init_transactions(TIMEOUT_S)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with await RemotingClient.connect(live_broker.addr) as client:
            p.begin_transaction()
            for i in range(3):
                p.produce("x-txn", value=b"aborted-%d" % i, partition=0)
            p.flush(TIMEOUT_S)
            resp = await client.invoke(_remoting_pull(0))  # open: nothing, the queue "ends" at the LSO
            assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.ext_fields["maxOffset"] == "0"
            p.abort_transaction(TIMEOUT_S)
            resp = await client.invoke(_remoting_pull(0))  # aborted records and the marker are skipped,
            assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and not resp.body  # as filtered ones
            assert resp.ext_fields["nextBeginOffset"] == resp.ext_fields["maxOffset"] == "4"

            p.begin_transaction()
            for i in range(3):
                p.produce("x-txn", value=b"committed-%d" % i, key=b"k%d" % i, partition=0)
            p.flush(TIMEOUT_S)
            started = time.monotonic()
            held = asyncio.ensure_future(client.invoke(_remoting_pull(4, hold_ms=10_000), timeout_s=15))
            await asyncio.sleep(0.5)
            assert not held.done()  # held at the LSO while the transaction is open
            await loop.run_in_executor(None, p.commit_transaction, TIMEOUT_S)
            resp = await held
            assert time.monotonic() - started < 8  # answered by the commit, not the hold's end
            got = decode_message_ext_records(resp.body)
            assert [(m.queue_offset, m.body, m.keys) for m in got] == [
                (4, b"committed-0", ["k0"]), (5, b"committed-1", ["k1"]), (6, b"committed-2", ["k2"])]
            resp = await client.invoke(_remoting_pull(0))  # from the start: the same three only
            assert [m.body for m in decode_message_ext_records(resp.body)] == [
                b"committed-0", b"committed-1", b"committed-2"]
            assert resp.ext_fields["nextBeginOffset"] == "8"  # past the commit marker

    asyncio.run(main())
    # the facade's own reads (every front-end's) obey the same rule
    result = live_broker.run(lambda: live_broker.server.broker.get_messages("x-txn", 0, 0, 32))
    assert result.message_count == 3


def test_stomp_subscriber_sees_only_committed_kafka_transactions(tmp_path):
    """The same read rule through the core's delivery engine: a STOMP /queue subscriber of a
    topic a Kafka transactional producer writes gets the committed records only, an open
    transaction's once it commits, never an aborted one nor a marker."""
    import threading

    import stomp

    from tests.support.kafka import start_broker

    class Listener(stomp.ConnectionListener):
        def __init__(self) -> None:
            self.bodies: list[bytes] = []
            self.cond = threading.Condition()

        def on_message(self, frame) -> None:
            with self.cond:
                self.bodies.append(frame.body)
                self.cond.notify_all()

        def wait(self, count: int, timeout: float) -> list[bytes]:
            with self.cond:
                self.cond.wait_for(lambda: len(self.bodies) >= count, timeout)
                return list(self.bodies)

    live = start_broker(str(tmp_path / "store"), "asyncio", stomp=ProtocolConfig(True, 0, "127.0.0.1"))
    try:
        create_topic(live, "x-stomp")
        conn = stomp.Connection12([live.endpoint("stomp")], timeout=TIMEOUT_S, auto_decode=False)
        listener = Listener()
        conn.set_listener("t", listener)
        conn.connect(wait=True)
        conn.subscribe("/queue/x-stomp", id="s", ack="auto", headers={"x-group": "StompTxn"})
        p = ConfluentProducer({"bootstrap.servers": live.bootstrap, "transactional.id": "x-stomp-1"})
        p.init_transactions(TIMEOUT_S)
        for outcome in ("aborted", "committed", "open"):
            p.begin_transaction()
            for i in range(2):
                p.produce("x-stomp", value=b"%s-%d" % (outcome.encode(), i), partition=0)
            p.flush(TIMEOUT_S)
            if outcome == "aborted":
                p.abort_transaction(TIMEOUT_S)
            elif outcome == "committed":
                p.commit_transaction(TIMEOUT_S)
        assert listener.wait(2, TIMEOUT_S) == [b"committed-0", b"committed-1"]
        assert listener.wait(3, 1.0) == [b"committed-0", b"committed-1"]  # nothing of the open one
        p.commit_transaction(TIMEOUT_S)
        assert listener.wait(4, TIMEOUT_S) == [b"committed-0", b"committed-1", b"open-0", b"open-1"]
        assert listener.wait(5, 1.0) == [b"committed-0", b"committed-1", b"open-0", b"open-1"]  # no marker
        conn.disconnect()
    finally:
        live.stop()
