"""A broker process whose descriptor limit (512, soft and hard) is far below its queue count
(3,000) keeps serving them all, and a resource limit met on a put reaches a Kafka client as
a retriable error on a connection that stays open.

Each mapped ConsumeQueue file once held a descriptor (Python's mmap dups the one it maps
from): at the limit a put failed with EMFILE, the broker logged a traceback and closed the
producer's connection, and the client reconnected into the same failure.
"""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.protocols.kafka.kafka_raw import RawClient, encode_batch
from tests.support.processes import REPO, broker_command

FD_LIMIT = 512
TOPICS = 750
QUEUES = 4  # 3,000 queues
_LISTENING = re.compile(r"(\S+(?: \([^)]*\))?) listening on ([\d.]+):(\d+)")


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _start(root: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """The broker with its descriptor limit lowered, and its Kafka port (from its log)."""
    command = broker_command(root, "listenPort=0", "namesrv.port=0", "kafka.port=0",
                             "mappedFileSizeConsumeQueue=20480", "mappedFileSizeCommitLog=67108864")
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=out, cwd=REPO,
                                preexec_fn=_limit_descriptors)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        text = log.read_text()
        if " ready (pid" in text:
            ports = {m.group(1): int(m.group(3)) for m in _LISTENING.finditer(text)}
            return proc, ports["kafka"]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the broker did not start:\n{log.read_text()[-3000:]}")


def _create_topics(bootstrap: str) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"scale-{i}" for i in range(TOPICS)]
    for start in range(0, TOPICS, 250):
        futures = admin.create_topics([NewTopic(n, QUEUES, 1) for n in names[start:start + 250]],
                                      request_timeout=120)
        for future in futures.values():
            future.result(timeout=120)
    return names


def _produce_into_every_queue(bootstrap: str, names: list[str]) -> None:
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for name in names:
        for q in range(QUEUES):
            producer.produce(name, b"%s/%d" % (name.encode(), q), partition=q,
                             on_delivery=lambda err, _msg: err and failed.append(str(err)))
        producer.poll(0)
    assert producer.flush(120) == 0
    assert failed == []


def _read_back(bootstrap: str, names: list[str]) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-readers",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(n, q, 0) for n in names for q in range(QUEUES)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 180
    try:
        while len(seen) < len(names) * QUEUES and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    seen.add(msg.value())
    finally:
        consumer.close()
    return seen


def _exhaust_descriptors(port: int, pid: int) -> list[socket.socket]:
    """Connections until the broker holds every descriptor it may (the rest wait in the
    listen backlog, unaccepted)."""
    held: list[socket.socket] = []
    deadline = time.monotonic() + 60
    while _open_fds(pid) < FD_LIMIT and time.monotonic() < deadline:
        for _ in range(FD_LIMIT - _open_fds(pid) + 4):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.2)
    assert _open_fds(pid) == FD_LIMIT
    return held


def test_more_queues_than_descriptors_and_a_limit_is_a_retriable_error(tmp_path):
    log = tmp_path / "broker.log"
    proc, port = _start(tmp_path / "store", log)
    bootstrap = f"127.0.0.1:{port}"
    try:
        names = _create_topics(bootstrap)
        _produce_into_every_queue(bootstrap, names)
        assert len(_read_back(bootstrap, names)) == TOPICS * QUEUES
        assert _open_fds(proc.pid) < FD_LIMIT // 2  # bounded, whatever the queue count

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("fresh", 1, 1)])["fresh"].result(timeout=60)
        with RawClient(port, timeout=30) as client:
            client.request(ApiKey.API_VERSIONS, 0, {})
            held = _exhaust_descriptors(port, proc.pid)
            try:
                batch = encode_batch([b"at the limit"])
                code, _ = client.produce("fresh", 0, batch)
                assert code == ErrorCode.KAFKA_STORAGE_ERROR  # retriable: the client tries again
            finally:
                for sock in held:
                    sock.close()
            deadline = time.monotonic() + 60  # the backlog is accepted and closed again
            while _open_fds(proc.pid) >= FD_LIMIT - 8 and time.monotonic() < deadline:
                time.sleep(0.1)
            # the same connection: it was answered, not dropped
            assert client.produce("fresh", 0, batch) == (ErrorCode.NONE, 0)
        assert proc.poll() is None
        text = log.read_text()
        assert "closing the connection" not in text, text[-3000:]
        assert "refused as retriable" in text  # the one line the refusal logs
    finally:
        proc.kill()
        proc.wait(30)
