"""Exactly-once across SIGKILL, with real processes: the broker killed while a transaction is
open and between EndTxn and its markers (committed transactions visible after the restart,
aborted, open and timed-out ones never), and a consume-transform-produce worker killed
mid-run whose successor leaves the output without a duplicate or a loss. (A timeout running
on after a restart: tests/core/txn; the coordinator's timeout abort: test_kafka_transactions.)"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rocketport.core.txn.log import CoordinatorLog

from tests.support.kafka import start_broker as start_live_broker
from tests.support.processes import REPO, start_broker, stop, wait_ready

TIMEOUT_S = 30
_SETTINGS = ("listenPort=0", "namesrv.port=0", "kafka.port=0", "mappedFileSizeCommitLog=67108864")


def broker_process(root: Path) -> tuple[subprocess.Popen, str]:
    proc = start_broker(root, *_SETTINGS)
    seen = wait_ready(proc)
    port = re.search(r"kafka listening on 127\.0\.0\.1:(\d+)", seen)
    assert port, seen
    return proc, f"127.0.0.1:{port.group(1)}"


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(TIMEOUT_S)


def txn_producer(bootstrap: str, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(TIMEOUT_S)
    return p


def committed_values(bootstrap: str, topic: str, settle_s: float = 1.0) -> list[bytes]:
    """Every value a read_committed consumer reads from the start of partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    eof_at = None
    while time.monotonic() < deadline and not (eof_at and time.monotonic() - eof_at > settle_s):
        msg = c.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            eof_at = eof_at or time.monotonic()
            continue
        eof_at = None
        got.append(msg.value())
    c.close()
    return got


def create(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(TIMEOUT_S)


def test_broker_killed_with_open_and_prepared_transactions(tmp_path):
    root = tmp_path / "store"
    proc, bootstrap = broker_process(root)
    try:
        create(bootstrap, "crash")
        done = txn_producer(bootstrap, "done")
        done.begin_transaction()
        for i in range(3):
            done.produce("crash", value=b"committed-%d" % i, partition=0)
        done.commit_transaction(TIMEOUT_S)
        open_ = txn_producer(bootstrap, "open", **{"transaction.timeout.ms": 60_000})
        open_.begin_transaction()
        open_.produce("crash", value=b"open", partition=0)
        open_.flush(TIMEOUT_S)
        plain = Producer({"bootstrap.servers": bootstrap})
        plain.produce("crash", value=b"plain-after-open", partition=0)
        assert plain.flush(TIMEOUT_S) == 0
        # two more transactions whose EndTxn the kill will interrupt (below)
        ending = {}
        for name in ("to-commit", "to-abort"):
            ending[name] = txn_producer(bootstrap, name)
            ending[name].begin_transaction()
            ending[name].produce("crash", value=name.encode(), partition=0)
            ending[name].flush(TIMEOUT_S)
    finally:
        kill(proc)

    # a kill between EndTxn and its markers leaves the coordinator log with the prepare
    # record as the last word on the transaction: append exactly that for two of them
    coordinator_log = CoordinatorLog(str(root / "config" / "transactions.log"), sync=False)
    last = {record["id"]: record for record in coordinator_log.replay() if "id" in record}
    assert last["open"]["state"] == "Ongoing" and last["to-commit"]["state"] == "Ongoing"
    for name, state in (("to-commit", "PrepareCommit"), ("to-abort", "PrepareAbort")):
        coordinator_log.append({**last[name], "state": state})
    coordinator_log.close()

    proc, bootstrap = broker_process(root)
    try:
        # restarted: the prepared ones completed before serving; the open one holds the LSO
        assert committed_values(bootstrap, "crash") == [b"committed-0", b"committed-1", b"committed-2"]
        again = txn_producer(bootstrap, "open")  # its next incarnation aborts it (and goes on)
        values = committed_values(bootstrap, "crash")
        assert values == [b"committed-0", b"committed-1", b"committed-2", b"plain-after-open", b"to-commit"]
        # the aborted ones stay invisible across another restart
        stop(proc)
        proc, bootstrap = broker_process(root)
        assert committed_values(bootstrap, "crash") == values
        again = txn_producer(bootstrap, "open")  # the id goes on, at a newer epoch
        again.begin_transaction()
        again.produce("crash", value=b"open-again", partition=0)
        again.commit_transaction(TIMEOUT_S)
        assert committed_values(bootstrap, "crash") == [*values, b"open-again"]
    finally:
        stop(proc)
    assert proc.returncode == 0


def test_consume_transform_produce_worker_killed_keeps_exactly_once(tmp_path):
    total = 1000
    live = start_live_broker(str(tmp_path / "store"))
    try:
        create(live.bootstrap, "eos-in", "eos-out")
        p = Producer({"bootstrap.servers": live.bootstrap})
        for i in range(total):
            p.produce("eos-in", value=b"record-%d" % i, partition=0)
        assert p.flush(TIMEOUT_S) == 0
        command = [sys.executable, "-m", "tests.protocols.kafka.eos_worker", live.bootstrap, str(total)]
        first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            progress, line = 0, ""
            deadline = time.monotonic() + TIMEOUT_S
            while not (progress >= 300 and line.startswith("open")) and time.monotonic() < deadline:
                line = first.stdout.readline()
                if not line:
                    break
                if line.startswith("committed"):
                    progress = int(line.split()[1])
            assert 300 <= progress < total and line.startswith("open"), (progress, line)
        finally:
            kill(first)  # inside a transaction whose records are stored
        second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=150)
        assert second.returncode == 0, second.stderr
        assert second.stdout.splitlines()[-1] == f"committed {total}"

        c = Consumer({"bootstrap.servers": live.bootstrap, "group.id": "verify",
                      "isolation.level": "read_committed", "enable.partition.eof": True})
        c.assign([TopicPartition("eos-out", 0, 0)])
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF
                break
            out.append((int(msg.key()), msg.value()))
        c.close()
        assert sorted(out) == [(i, b"RECORD-%d" % i) for i in range(total)]  # none twice, none lost
        # the killed worker's last transaction is in the log, aborted: read_uncommitted shows it
        assert live.run(live.server.broker.max_offset, "eos-out", 0) > total + total // 50
    finally:
        live.stop()


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, eof = 0, set()
    deadline = time.monotonic() + TIMEOUT_S
    while len(eof) < partitions and time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            eof.add(msg.partition())
        else:
            count += 1
    c.close()
    assert len(eof) == partitions
    return count


def test_broker_killed_right_after_end_txn_is_all_or_nothing(tmp_path):
    """A real SIGKILL a moment after EndTxn(commit) is sent, before or while its markers are
    written, four times at different moments: after each restart the transaction's 16
    partitions are all visible or none (and none stays open past its timeout)."""
    from rocketport.protocols.kafka.schema import ApiKey

    from .kafka_raw import RawClient

    root, partitions = tmp_path / "store", 16
    for round_, delay_s in enumerate((0.0, 0.0005, 0.001, 0.003)):
        topic = f"atomic-{round_}"
        proc, bootstrap = broker_process(root)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)
            p = txn_producer(bootstrap, f"atomic-{round_}", **{"transaction.timeout.ms": 2000})
            p.begin_transaction()
            for partition in range(partitions):
                p.produce(topic, value=b"v", partition=partition)
            p.flush(TIMEOUT_S)
            port = int(bootstrap.rsplit(":", 1)[1])
            with RawClient(port) as client:
                state = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [f"atomic-{round_}"]})
                state = state["transaction_states"][0]
                client.send(ApiKey.END_TXN, 3, {"transactional_id": f"atomic-{round_}", "committed": True,
                                                "producer_id": state["producer_id"],
                                                "producer_epoch": state["producer_epoch"]})
                time.sleep(delay_s)
                kill(proc)
        finally:
            if proc.poll() is None:
                kill(proc)
        proc, bootstrap = broker_process(root)
        try:
            # an open transaction is aborted once its timeout passes: wait for it to end
            deadline = time.monotonic() + TIMEOUT_S
            with RawClient(int(bootstrap.rsplit(":", 1)[1])) as client:
                while True:
                    state = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                           {"transactional_ids": [f"atomic-{round_}"]})
                    ended = state["transaction_states"][0]["transaction_state"]
                    if ended in ("CompleteCommit", "CompleteAbort") or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            seen = committed_count(bootstrap, topic, partitions)
            assert (ended, seen) in (("CompleteCommit", partitions), ("CompleteAbort", 0))
        finally:
            stop(proc)
