"""A Kafka OffsetCommit that was answered survives a SIGKILL of the broker, as Kafka's does
(its answer follows the __consumer_offsets write): after a restart the group resumes from
the committed offset, not from an older one. Real broker processes; the periodic offsets
flush is set to an hour, so only the commit's own save can have kept it."""

from __future__ import annotations

import socket

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.processes import start_broker, stop, wait_ready

TOPIC = "offsets-crash"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _consumer(port: int) -> Consumer:
    return Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "crash-group",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def _read(consumer: Consumer, count: int) -> list[int]:
    offsets: list[int] = []
    for _ in range(200):  # bounded: 200 polls of at most 0.1 s
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            offsets.append(msg.offset())
            if len(offsets) == count:
                break
    return offsets


def _settings(port: int) -> tuple[str, ...]:
    """Kafka on ``port``; the periodic offsets flush at an hour, so only a commit's own
    save can have kept an offset."""
    return ("listenPort=0", "namesrv.port=0", f"kafka.port={port}", "flushConsumerOffsetInterval=3600000")


def _produce(port: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    for i in range(count):
        producer.produce(TOPIC, b"v%d" % i, partition=0)
    assert producer.flush(20) == 0


def _committed_after_restart(root, port: int) -> int:
    again = start_broker(root, *_settings(port))
    try:
        wait_ready(again)
        consumer = _consumer(port)
        [committed] = consumer.committed([TopicPartition(TOPIC, 0)], timeout=20)
        consumer.close()
        return committed.offset
    finally:
        stop(again)


def test_a_committed_offset_survives_a_sigkill(tmp_path):
    root, port = tmp_path / "store", _free_port()
    proc = start_broker(root, *_settings(port))
    try:
        wait_ready(proc)
        _produce(port, 20)
        consumer = _consumer(port)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        assert _read(consumer, 12) == list(range(12))
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 12)], asynchronous=False)
        consumer.close()
    finally:
        proc.kill()  # SIGKILL right after the commit's answer
        proc.wait()
    again = start_broker(root, *_settings(port))
    try:
        wait_ready(again)
        consumer = _consumer(port)
        [committed] = consumer.committed([TopicPartition(TOPIC, 0)], timeout=20)
        assert committed.offset == 12
        consumer.subscribe([TOPIC])
        assert _read(consumer, 8) == list(range(12, 20))
        consumer.close()
    finally:
        stop(again)


def test_offsets_a_committed_transaction_carried_survive_a_sigkill(tmp_path):
    """A consume-transform-produce loop's offsets (sendOffsetsToTransaction) are on disk
    once its commit is answered: a SIGKILL right after loses neither them nor the output."""
    root, port = tmp_path / "store", _free_port()
    proc = start_broker(root, *_settings(port))
    try:
        wait_ready(proc)
        _produce(port, 10)
        consumer = _consumer(port)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        assert _read(consumer, 6) == list(range(6))
        txn = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": "crash-eos"})
        txn.init_transactions(20)
        txn.begin_transaction()
        txn.produce("offsets-crash-out", b"out", partition=0)
        txn.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 6)], consumer.consumer_group_metadata(), 20)
        txn.commit_transaction(20)
        consumer.close()
    finally:
        proc.kill()  # SIGKILL right after the commit's answer
        proc.wait()
    assert _committed_after_restart(root, port) == 6
