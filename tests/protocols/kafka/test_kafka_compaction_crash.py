"""A changelog topic (100,000 updates over 1,000 keys, as Kafka Streams writes a state store's
changelog) compacts to 1,000 records, and a SIGKILL in the middle of a compaction loses
nothing and serves no half state: after restarts a Streams-style restore (kafka-python, from
the beginning to the end offset, into a table) gets each key's latest value at its original
offset. Real broker processes; a compaction is caught in the middle by its ``.tmp`` file."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from tests.support.processes import start_broker, stop, wait_ready

TOPIC = "store-changelog"
KEYS = 1000
UPDATES = 100_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(port: int, interval_ms: int) -> tuple[str, ...]:
    return ("listenPort=0", "namesrv.port=0", f"kafka.port={port}",
            f"compactionScheduleInternal={interval_ms}")


def _write_changelog(port: int) -> dict[bytes, tuple[int, bytes]]:
    """The updates, and key -> (offset, value) of each key's last one."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(20)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 20,
                         "compression.type": "lz4"})
    failed: list = []
    table = {}
    for i in range(UPDATES):
        key, value = b"key-%d" % (i * 7919 % KEYS), b"value-%d" % i
        table[key] = (i, value)
        while True:
            try:
                producer.produce(TOPIC, value, key, partition=0,
                                 on_delivery=lambda err, _: err is not None and failed.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed
    return table


def _restore(port: int) -> tuple[dict[bytes, tuple[int, bytes]], int]:
    """A Streams-style restore: from the beginning to the end offset, into a table; and how
    many records it read."""
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", enable_auto_commit=False,
                             consumer_timeout_ms=1000)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    table: dict[bytes, tuple[int, bytes]] = {}
    count = 0
    deadline = time.monotonic() + 60
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                table[record.key] = (record.offset, record.value)
                count += 1
    consumer.close()
    return table, count


def _compacting(directory: Path, proc, timeout: float = 60) -> bool:
    """Wait (bounded) until a compaction is writing (its .tmp exists): True, or False when
    the broker ended or the time passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if directory.is_dir() and any(name.endswith(".tmp") for name in os.listdir(directory)):
            return True
        time.sleep(0.002)
    return False


def _snapshots(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".clog")) if directory.is_dir() else []


def test_a_changelog_compacts_to_one_record_per_key_through_sigkills_mid_compaction(tmp_path):
    root, port = tmp_path / "store", _free_port()
    queue_dir = root / "compaction" / TOPIC / "0"
    proc = start_broker(root, *_settings(port, 3_600_000))  # no compaction while writing
    try:
        wait_ready(proc)
        table = _write_changelog(port)
    finally:
        stop(proc)
    caught = 0
    for _ in range(2):  # each start compacts at once; killed while it writes its snapshot
        proc = start_broker(root, *_settings(port, 100))
        try:
            wait_ready(proc)
            caught += _compacting(queue_dir, proc)
        finally:
            proc.kill()
            proc.wait()
    assert caught >= 1
    proc = start_broker(root, *_settings(port, 100))
    try:
        wait_ready(proc)
        deadline = time.monotonic() + 60
        while not _snapshots(queue_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _snapshots(queue_dir)
        restored, read = _restore(port)
        assert restored == table
        assert read == KEYS
    finally:
        stop(proc)
