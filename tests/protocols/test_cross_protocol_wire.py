"""One store, wire to wire: what a real Kafka client produces, a real RocketMQ client
consumes (and the reverse), each through its own front-end of one live broker, with body,
key, tags, headers/properties and timestamp carried as the mapping table says."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rocketport.core.config import ProtocolConfig
from tests.support.live_broker import LiveBroker, start_live_broker

ROCKETMQ_CLIENT = Path(__file__).parents[2] / "interop" / "rocketmq_py" / "client.py"


@pytest.fixture
def broker(small_config) -> LiveBroker:
    config = dataclasses.replace(small_config, listen_port=0, namesrv=ProtocolConfig(True, 0),
                                 kafka=ProtocolConfig(True, 0), mapped_file_size_commit_log=8 << 20,
                                 default_topic_queue_nums=2)
    live = start_live_broker(config)
    try:
        yield live
    finally:
        live.stop()


def _rocketmq(home: Path, *args: str, timeout: float = 90) -> list[dict]:
    proc = subprocess.run([sys.executable, str(ROCKETMQ_CLIENT), *args], env=dict(os.environ, HOME=str(home)),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"rocketmq client {args[0]} failed:\n{proc.stdout}\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_kafka_produced_messages_are_pushed_to_a_rocketmq_consumer_with_tag_filter(broker, tmp_path):
    broker.call(lambda: broker.server.broker.create_topic("wire", read_queue_nums=2, write_queue_nums=2))
    born = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4",
                         "linger.ms": 5})
    for i in range(20):
        producer.produce("wire", value=b"k-%d" % i, key=b"order-%d" % i, partition=i % 2,
                         timestamp=born + i,
                         headers=[("tag", b"TagA" if i % 2 == 0 else b"TagB"), ("color", b"red")])
    assert producer.flush(20) == 0
    got = _rocketmq(tmp_path, "push", broker.namesrv, "wire", "WireGroup", "10", "--expr", "TagA",
                    "--timeout", "60", "--linger", "2", "--show-prop", "color")
    by_body = {m["body"]: m for m in got}
    assert set(by_body) == {f"k-{i}" for i in range(0, 20, 2)}, "only TagA, all of them"
    first = by_body["k-0"]
    assert first["tags"] == "TagA" and first["keys"] == "order-0"
    assert first["props"] == {"color": "red"} and first["born_timestamp"] == born


def test_rocketmq_produced_messages_are_fetched_by_a_kafka_consumer(broker, tmp_path):
    sent = _rocketmq(tmp_path, "produce", broker.namesrv, "wire-back", "6", "--tag", "TagZ",
                     "--key-prefix", "rk-", "--body-prefix", "rb-", "--prop", "region=eu")
    assert [r["status"] for r in sent] == [0] * 6
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wire-kafka",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("wire-back", q, 0) for q in range(2)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    consumer.close()
    assert sorted(m.value() for m in got) == sorted(b"rb-%d" % i for i in range(6))
    one = next(m for m in got if m.value() == b"rb-0")
    headers = dict(one.headers())
    assert one.key() == b"rk-0" and headers["tag"] == b"TagZ" and headers["region"] == b"eu"
