"""Broker.put_gathered: a run of plain messages stored as one inner batch reads back, for
every reader, as the messages that were put: per message through the facade, with tag and
SQL92 filters, key look-ups and distinct message ids, after a recovery that rebuilds the
ConsumeQueue, and on the wire to a remoting consumer and a Kafka consumer."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from rocketport.core.broker import Broker
from rocketport.core.errors import InvalidMessage
from rocketport.core.filter import compile_filter
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.handlers import SUBSCRIPTION_FLAG
from rocketport.protocols.remoting.messages import decode_message_ext_records
from tests.support.aio import run
from tests.support.kafka import start_broker

TIMEOUT_S = 20

# (body, properties): two routing keys, a key, a caller's own UNIQ_KEY, binary-ish text
RUN = [(b"m-%d" % i, {"TAGS": "eu" if i % 2 else "us", "region": "r%d" % (i % 3), "n": str(i)})
       for i in range(10)]
RUN[3][1]["KEYS"] = "order-3"
RUN[4][1]["UNIQ_KEY"] = "MY-OWN-ID"
RUN[5][1]["h\u00e9"] = "\u00e9t\u00e9"


def _read(broker: Broker, topic: str, flt=None) -> list:
    res = broker.get_messages(topic, 0, 0, 64, message_filter=flt)
    return list(res.messages(message_filter=flt))


def test_a_gathered_run_reads_back_per_message(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("G", read_queue_nums=1, write_queue_nums=1)
            result = await broker.put_gathered("G", RUN, born_host=("10.0.0.7", 4321))
            assert (result.queue_id, result.queue_offset, result.count) == (0, 0, 10)
            assert broker.max_offset("G", 0) == 10
            msgs = _read(broker, "G")
            assert [m.queue_offset for m in msgs] == list(range(10))
            assert [m.body for m in msgs] == [body for body, _ in RUN]
            for m, (_, props) in zip(msgs, RUN):
                assert {k: v for k, v in m.properties.items() if k != "tag"} == {"UNIQ_KEY": m.uniq_key, **props}
                assert m.properties["tag"] == props["TAGS"]  # the Kafka view of the tag
                assert m.born_host == ("10.0.0.7", 4321)
                assert m.commit_log_offset == result.commit_log_offset
            ids = [m.uniq_key for m in msgs]
            assert ids[4] == "MY-OWN-ID" and len(set(ids)) == 10

            eu = _read(broker, "G", compile_filter("TAG", "eu"))
            assert [m.body for m in eu] == [b"m-%d" % i for i in range(1, 10, 2)]
            sql = _read(broker, "G", compile_filter("SQL92", "region = 'r0' AND TAGS = 'us'"))
            assert [m.body for m in sql] == [b"m-0", b"m-6"]

            found = broker.query_by_key("G", "order-3")
            assert [(m.body, m.queue_offset) for m in found] == [(b"m-3", 3)]

            # one properties object repeated (what a publisher's run mostly is), another between
            shared, other = {"TAGS": "s", "a": "1"}, {"b": "2"}
            await broker.put_gathered("G", [(b"s1", shared), (b"s2", shared), (b"o", other), (b"s3", shared)])
            again = broker.get_messages("G", 0, 10, 8).messages()
            assert [(m.body, m.tags, m.properties.get("a"), m.properties.get("b")) for m in again] == [
                (b"s1", "s", "1", None), (b"s2", "s", "1", None), (b"o", None, None, "2"), (b"s3", "s", "1", None)]
            assert shared == {"TAGS": "s", "a": "1"} and other == {"b": "2"}  # left as given
    run(main())


def test_one_routing_key_is_the_batch_tags_and_survives_recovery(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("R", read_queue_nums=1, write_queue_nums=1)
            await broker.put_gathered("R", [(b"a", {"TAGS": "x"}), (b"b", {"TAGS": "x"})])
            await broker.put_gathered("R", [(b"c", {"TAGS": "y"}), (b"d", {}), (b"e", {"TAGS": "x"})])
        root = small_config.store_path_root_dir
        shutil.rmtree(os.path.join(root, "consumequeue"))  # rebuilt from the CommitLog
        os.remove(os.path.join(root, "checkpoint"))
        async with Broker(small_config) as broker:
            assert [m.body for m in _read(broker, "R", compile_filter("TAG", "x"))] == [b"a", b"b", b"e"]
            assert [m.body for m in _read(broker, "R", compile_filter("TAG", "y"))] == [b"c"]
    run(main())


def test_messages_that_need_their_own_treatment_are_refused(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("N", read_queue_nums=1, write_queue_nums=1)
            for props in ({"DELAY": "3"}, {"TIMER_DELIVER_MS": "1"}, {"TRAN_MSG": "true"},
                          {"DEDUP_KEY": "k"}, {"tag": "not-the-routing-key"}):
                with pytest.raises(InvalidMessage):
                    await broker.put_gathered("N", [(b"ok", {}), (b"no", props)])
            with pytest.raises(InvalidMessage):
                await broker.put_gathered("N", [])
            assert broker.max_offset("N", 0) == 0
    run(main())


def test_sync_flush_returns_once_flushed(small_config):
    config = dataclasses.replace(small_config, flush_disk_type="SYNC_FLUSH")

    async def main():
        async with Broker(config) as broker:
            broker.create_topic("S", read_queue_nums=2, write_queue_nums=2)
            results = [await broker.put_gathered("S", RUN[:3]) for _ in range(2)]
            assert sorted(r.queue_id for r in results) == [0, 1]  # round robin, as put_message
            assert all(broker.store.commitlog.queue.flushed_offset >= r.commit_log_offset + r.wrote_bytes
                       for r in results)
    run(main())


def _pull(topic: str, offset: int) -> object:
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "gathered", "topic": topic, "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(SUBSCRIPTION_FLAG), "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": "eu", "subVersion": "0", "expressionType": "TAG"})


def test_remoting_and_kafka_consumers_read_a_gathered_run(tmp_path):
    live = start_broker(str(tmp_path / "store"))
    try:
        broker = live.server.broker
        live.run(lambda: broker.create_topic("W", read_queue_nums=1, write_queue_nums=1))
        live.call(broker.put_gathered("W", RUN))

        async def remoting() -> list:
            async with await RemotingClient.connect(live.addr) as client:
                resp = await client.invoke(_pull("W", 0))
                assert resp.code == ResponseCode.SUCCESS
                return decode_message_ext_records(resp.body)
        got = asyncio.run(remoting())
        assert [(m.queue_offset, m.body, m.tags) for m in got] == [
            (i, b"m-%d" % i, "eu") for i in range(1, 10, 2)]
        assert len({m.uniq_key for m in got}) == 5
        assert got[1].keys == ["order-3"]

        c = KafkaConsumer(bootstrap_servers=live.bootstrap, auto_offset_reset="earliest",
                          enable_auto_commit=False)
        c.assign([TopicPartition("W", 0)])
        records: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < 10 and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                records.extend(batch)
        c.close()
        assert [(r.offset, r.value) for r in records] == [(i, b"m-%d" % i) for i in range(10)]
        assert records[3].key == b"order-3"
        headers = dict(records[5].headers)
        assert headers["tag"] == b"eu" and headers["region"] == b"r2"
        assert headers["h\u00e9"] == "\u00e9t\u00e9".encode()
    finally:
        live.stop()
