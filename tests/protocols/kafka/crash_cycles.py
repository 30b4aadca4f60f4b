"""Support for the Kafka crash-cycle tests: a real broker process on a fixed Kafka port that
a killer thread SIGKILLs and restarts on the same port while a client goes on producing, and
a reader of every record of a topic afterwards.

A broker's log goes to a file (never an undrained pipe, which would block a long run); it is
ready when the log says so."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.processes import RestartableBroker
from tests.support.remoting import free_port

TIMEOUT_S = 60
PARTITIONS = 4


class BrokerProcess(RestartableBroker):
    """The crash tests' broker: one store, always on the same Kafka port, SYNC_FLUSH."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        super().__init__(root, "listenPort=0", "namesrv.port=0", f"kafka.port={self.port}",
                         "mappedFileSizeCommitLog=16777216", f"defaultTopicQueueNums={PARTITIONS}",
                         "flushDiskType=SYNC_FLUSH", timeout=TIMEOUT_S)


class Killer(threading.Thread):
    """``cycles`` times: let the client run ``run_s`` seconds, SIGKILL the broker, restart it
    on the same port. The client's thread goes on meanwhile; it stops once ``done`` is set."""

    def __init__(self, broker: BrokerProcess, cycles: int, run_s: float) -> None:
        super().__init__(daemon=True)
        self.broker, self.cycles, self.run_s = broker, cycles, run_s
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for _ in range(self.cycles):
                time.sleep(self.run_s)
                self.broker.kill()
                self.broker.start()
            time.sleep(self.run_s)  # the client goes on against the last restart too
        except BaseException as exc:  # reported by the test's thread
            self.error = exc
        finally:
            self.done.set()


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


def read_all(bootstrap: str, topic: str, *, committed: bool = False, partitions: int = PARTITIONS) -> Counter:
    """How many times each value is stored in the topic, as a consumer reads it from the start
    of every partition (read_committed when ``committed``) to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "enable.partition.eof": True, "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Counter = Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    at_end.add(msg.partition())
                else:
                    at_end.discard(msg.partition())
                    seen[msg.value()] += 1
    finally:
        consumer.close()
    assert len(at_end) == partitions, f"read to the end of {sorted(at_end)} only"
    return seen
