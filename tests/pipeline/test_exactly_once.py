"""Exactly once from topic to topic through Spark: a streaming copy (the rocketport source,
the rocketport sink, a checkpoint) whose driver is SIGKILLed in the middle of a micro-batch
and restarted, and whose broker is SIGKILLed (with the driver) between the sink's writes
and the checkpoint's commit and restarted: the output topic holds each input record once.

The first run stalls one task of the second micro-batch (tests/pipeline/copy_driver.py);
the test waits until the other task's rows are stored (so the batch is half written and
not committed), then kills. The restarted driver replays the batch from its checkpoint
and resends under the same dedup keys (docs/pipeline.md), which the broker drops: from its
memory, or after a restart from its log (core/dedup.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketport.client import AdminClient, Message
from tests.pipeline.conftest import produce
from tests.pipeline.copy_driver import MAX_OFFSETS_PER_TRIGGER
from tests.support.aio import run
from tests.support.processes import REPO, RestartableBroker
from tests.support.remoting import free_port

pytestmark = pytest.mark.slow
RECORDS = 4000  # two queues, two micro-batches of 1,000 offsets a queue
TIMEOUT_S = 300


class Named:
    """What `produce` needs of a broker: its name server."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv


def topics(namesrv: str, *names: str) -> None:
    async def main() -> None:
        async with AdminClient(namesrv) as admin:
            for name in names:
                await admin.create_topic(name, queue_nums=2)
    run(main())


def stored(namesrv: str, topic: str) -> list[bytes]:
    """Every body the topic holds (offset 0 to max of each queue), duplicates included."""
    from rocketport.pipeline.remote import Link, subscription

    out: list[bytes] = []
    with Link(namesrv) as link:
        for mq in link.queues(topic):
            end, offset = link.max_offsets([mq])[0], 0
            while offset < end:
                result = link.pull(link.broker_addr(mq), mq, offset, 1024, subscription(topic, None, None))
                out += [m.body for m in result.messages]
                offset = result.next_begin_offset
    return out


def driver(namesrv: str, checkpoint: Path, log: Path, stall: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.pipeline.copy_driver", namesrv, "EoIn", "EoOut", str(checkpoint)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "a") as out:
        # a session of its own: the driver, its JVM and Python workers are killed together
        return subprocess.Popen(args + ([str(stall)] if stall else []), cwd=REPO, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(TIMEOUT_S)


def until(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def half_written(namesrv: str, proc: subprocess.Popen, stall: Path, log: Path) -> None:
    """Wait for the stalled task, and for the other task's rows of that batch to be stored."""
    until(lambda: stall.exists() or proc.poll() is not None, "the driver never stalled")
    assert proc.poll() is None, log.read_text()[-3000:]
    until(lambda: len(stored(namesrv, "EoOut")) > MAX_OFFSETS_PER_TRIGGER, "no row of the second batch stored")


def finish(namesrv: str, checkpoint: Path, log: Path) -> None:
    proc = driver(namesrv, checkpoint, log)
    try:
        assert proc.wait(TIMEOUT_S) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            kill_group(proc)


def assert_each_once(namesrv: str) -> None:
    bodies = stored(namesrv, "EoOut")
    assert sorted(bodies) == sorted(b"eo%05d" % i for i in range(RECORDS))


def test_driver_killed_mid_batch(broker, tmp_path):
    topics(broker.namesrv, "EoIn", "EoOut")
    produce(broker, [Message("EoIn", b"eo%05d" % i, tags="t%d" % (i % 3)) for i in range(RECORDS)])
    checkpoint, log, stall = tmp_path / "ckpt", tmp_path / "driver.log", tmp_path / "stalled"
    proc = driver(broker.namesrv, checkpoint, log, stall)
    try:
        half_written(broker.namesrv, proc, stall, log)
        partial = len(stored(broker.namesrv, "EoOut"))
    finally:
        kill_group(proc)
    assert MAX_OFFSETS_PER_TRIGGER < partial < RECORDS
    dropped = broker.call(lambda: broker.server.broker.dedup.dropped)
    finish(broker.namesrv, checkpoint, log)
    assert_each_once(broker.namesrv)
    # the replay resent the half batch's stored rows under their keys, and the broker dropped them
    assert broker.call(lambda: broker.server.broker.dedup.dropped) - dropped == partial - MAX_OFFSETS_PER_TRIGGER


class BrokerProcess(RestartableBroker):
    """A broker process on fixed remoting and name-server ports, restartable on its store."""

    def __init__(self, root: Path) -> None:
        self.port, self.ns_port = free_port(), free_port()
        self.namesrv = f"127.0.0.1:{self.ns_port}"
        super().__init__(root, f"listenPort={self.port}", f"namesrv.port={self.ns_port}", "kafka.enabled=false",
                         "mappedFileSizeCommitLog=16777216", timeout=TIMEOUT_S)


def test_broker_killed_between_the_sink_write_and_the_commit(tmp_path):
    broker = BrokerProcess(tmp_path / "store")
    broker.start()
    try:
        topics(broker.namesrv, "EoIn", "EoOut")
        produce(Named(broker.namesrv), [Message("EoIn", b"eo%05d" % i, tags="t%d" % (i % 3))
                                        for i in range(RECORDS)])
        checkpoint, log, stall = tmp_path / "ckpt", tmp_path / "driver.log", tmp_path / "stalled"
        proc = driver(broker.namesrv, checkpoint, log, stall)
        try:
            half_written(broker.namesrv, proc, stall, log)
        finally:
            broker.kill()  # written, not committed: the checkpoint has no commit for the batch
            kill_group(proc)
        assert not (checkpoint / "commits" / "1").exists()
        broker.start()
        assert MAX_OFFSETS_PER_TRIGGER < len(stored(broker.namesrv, "EoOut")) < RECORDS
        finish(broker.namesrv, checkpoint, log)
        assert_each_once(broker.namesrv)
    finally:
        broker.stop()
