"""Idempotent and transactional Kafka producers live through broker SIGKILLs (issue 30).

A real broker process is killed with SIGKILL and restarted on the same port, again and
again, while one producer (never restarted by the test) goes on producing: confluent-kafka
and the Java client 3.9, each with enable.idempotence and acks=all and as a transactional
producer whose transactions the kills interrupt. Afterwards no producer saw a
fatal error, every acknowledged record is stored exactly once, and a read_committed
consumer sees each committed transaction whole and once and no aborted one. The broker's
producer state is derived from the stored batches (core/txn/producer_state.py), so a retry
of a batch stored before the kill is a duplicate and the next batch is in sequence.

Two cycles in the default suite; ten with ``-m slow``.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from .crash_cycles import PARTITIONS, TIMEOUT_S, BrokerProcess, Killer, create_topic, read_all
from .java_support import LIB, compile_java

RUN_S = 2.0  # producing between kills
CYCLES = [pytest.param(2, id="2-cycles"), pytest.param(10, id="10-cycles", marks=pytest.mark.slow)]


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "store")
    process.start()
    yield process
    process.stop()


def assert_exactly_once(acked: list[bytes], stored: Counter) -> None:
    assert acked, "nothing was acknowledged"
    assert len(set(acked)) == len(acked)
    lost = [v for v in acked if stored[v] == 0]
    twice = {v: n for v, n in stored.items() if n > 1}
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {lost[:5]}"
    assert not twice, f"{len(twice)} records stored more than once, e.g. {list(twice.items())[:5]}"


@pytest.mark.parametrize("cycles", CYCLES)
def test_confluent_idempotent_producer_lives_through_broker_kills(broker, cycles):
    create_topic(broker.bootstrap, "idem")
    acked: list[bytes] = []
    failed: list[tuple[bytes, KafkaError]] = []
    fatal: list[KafkaError] = []

    def delivered(err, msg) -> None:
        (acked.append(msg.value()) if err is None else failed.append((msg.value(), err)))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 300_000, "reconnect.backoff.max.ms": 500,
                         "error_cb": lambda err: err.fatal() and fatal.append(err)})
    killer = Killer(broker, cycles, RUN_S)
    killer.start()
    seq = 0
    while not killer.done.is_set() and not fatal:  # ~10,000 records a second, through the kills
        for _ in range(100):
            try:
                producer.produce("idem", value=b"c%09d" % seq, partition=seq % PARTITIONS, on_delivery=delivered)
            except BufferError:  # the client's queue is full while the broker is down
                break
            seq += 1
        producer.poll(0.01)
    killer.join(TIMEOUT_S)
    assert killer.error is None, killer.error
    assert producer.flush(TIMEOUT_S) == 0
    assert not fatal, fatal
    assert not failed, failed[:5]
    assert broker.starts == cycles + 1
    assert_exactly_once(acked, read_all(broker.bootstrap, "idem"))
    assert len(acked) == seq


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory) -> Path:
    return compile_java(tmp_path_factory.mktemp("java"), "IdempotentCrashProducer", "TxnCrashProducer")


def run_java_through_kills(broker: BrokerProcess, classes: Path, tmp_path: Path, cycles: int, program: str,
                           *args: str) -> dict[str, str]:
    """Run a Java producer (it prints PRODUCING, then produces until the stop file exists)
    while the broker is killed and restarted ``cycles`` times; its closing lines by key."""
    stop_file = tmp_path / "stop"
    java = subprocess.Popen(["java", "-cp", f"{classes}:{LIB}/*", program, broker.bootstrap, *args, str(stop_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert java.stdout.readline().strip() == "PRODUCING"
        killer = Killer(broker, cycles, RUN_S)
        killer.run()  # in this thread: the Java program produces in its own process
        assert killer.error is None, killer.error
        stop_file.touch()
        out, err = java.communicate(timeout=TIMEOUT_S * 3)
    finally:
        if java.poll() is None:
            java.kill()
            java.wait()
    assert java.returncode == 0, err[-3000:]
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert "FATAL" not in lines, (lines["FATAL"], err[-3000:])
    return lines


@pytest.mark.parametrize("cycles", CYCLES)
def test_java_idempotent_producer_lives_through_broker_kills(broker, java_classes, tmp_path, cycles):
    create_topic(broker.bootstrap, "idem-java")
    lines = run_java_through_kills(broker, java_classes, tmp_path, cycles, "IdempotentCrashProducer",
                                   "idem-java", str(PARTITIONS))
    assert lines["ERRORS"] == "0", lines["ERRORS"]
    sent, unacked = int(lines["SENT"]), _ranges(lines["UNACKED"])
    acked = [b"j%09d" % i for i in range(sent) if i not in unacked]
    assert len(acked) == sent  # a producer that lived through every kill has them all acknowledged
    assert_exactly_once(acked, read_all(broker.bootstrap, "idem-java"))


def _ranges(text: str) -> set[int]:
    """The Java program's list of indexes ("-" for none, else "a-b,c-d")."""
    out: set[int] = set()
    for part in text.split(","):
        if part != "-":
            low, high = map(int, part.split("-"))
            out.update(range(low, high + 1))
    return out


TXN_RECORDS = 10  # per transaction, over two partitions


@pytest.mark.parametrize("cycles", CYCLES)
def test_transactional_producer_lives_through_broker_kills(broker, cycles):
    """Transactions run back to back while the kills land, mostly inside one: the client
    commits it (retrying the commit while the broker is away) or aborts it when the broker
    says it must. read_committed then shows each committed transaction whole and once, and
    nothing of an aborted one."""
    create_topic(broker.bootstrap, "txn-crash", 2)
    fatal: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "crash-txn",
                         "linger.ms": 5, "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000,
                         "reconnect.backoff.max.ms": 500,
                         "error_cb": lambda err: err.fatal() and fatal.append(err)})
    producer.init_transactions(TIMEOUT_S)
    committed: list[int] = []
    aborted: list[int] = []
    killer = Killer(broker, cycles, RUN_S)
    killer.start()
    txn = 0
    while not killer.done.is_set():
        producer.begin_transaction()
        for i in range(TXN_RECORDS):
            producer.produce("txn-crash", value=b"t%07d-%02d" % (txn, i), partition=i % 2)
        (committed if _finish(producer) else aborted).append(txn)
        txn += 1
    killer.join(TIMEOUT_S)
    assert killer.error is None, killer.error
    assert not fatal, fatal
    assert broker.starts == cycles + 1
    stored = read_all(broker.bootstrap, "txn-crash", committed=True, partitions=2)
    by_txn = Counter(int(value[1:8]) for value in stored)
    assert all(n == 1 for n in stored.values()), [v for v, n in stored.items() if n > 1][:5]
    assert all(by_txn[t] == TXN_RECORDS for t in committed), [t for t in committed if by_txn[t] != TXN_RECORDS][:5]
    assert not [t for t in aborted if by_txn[t]], "an aborted transaction is visible"
    assert set(by_txn) <= set(committed)
    assert len(committed) > cycles  # transactions committed after every restart


@pytest.mark.parametrize("cycles", CYCLES)
def test_java_transactional_producer_lives_through_broker_kills(broker, java_classes, tmp_path, cycles):
    """The same with the Java client 3.9's transactional producer (java/TxnCrashProducer.java:
    a commit that times out while the broker is away is retried, an abortable error aborts)."""
    create_topic(broker.bootstrap, "txn-java", 2)
    lines = run_java_through_kills(broker, java_classes, tmp_path, cycles, "TxnCrashProducer", "txn-java")
    committed, aborted = _ranges(lines["COMMITTED"]), _ranges(lines["ABORTED"])
    stored = read_all(broker.bootstrap, "txn-java", committed=True, partitions=2)
    by_txn = Counter(int(value[1:8]) for value in stored)
    assert all(n == 1 for n in stored.values()), [v for v, n in stored.items() if n > 1][:5]
    assert all(by_txn[t] == TXN_RECORDS for t in committed), [t for t in committed if by_txn[t] != TXN_RECORDS][:5]
    assert not [t for t in aborted if by_txn[t]], "an aborted transaction is visible"
    assert set(by_txn) <= committed
    assert len(committed) > cycles


def _finish(producer: Producer) -> bool:
    """Commit the open transaction: True once committed, False when the client had to abort
    it. A retriable failure (the broker away) is retried, as confluent-kafka says to."""
    deadline = time.monotonic() + TIMEOUT_S * 2
    while True:
        try:
            producer.commit_transaction(TIMEOUT_S)
            return True
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.txn_requires_abort():
                break
            if not error.retriable() or time.monotonic() > deadline:
                raise
    while True:
        try:
            producer.abort_transaction(TIMEOUT_S)
            return False
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise
