"""A slave compacts its own copy of the log (core/compaction writes only compacted logs, never
the CommitLog): after a Kafka producer writes a compacted topic to the master, the slave,
having copied the topic (its cleanup.policy with it) and caught up, holds a compacted log
with the latest record of every key at its original offset. Real processes."""

from __future__ import annotations

import os

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rocketport.core.compaction.snapshot import latest_snapshot
from tests.ha.cluster import master_and_slave, wait_for
from tests.ha.test_sync_master import runtime

TOPIC = "slave-compacted"


def _compacted_log(root) -> list[str]:
    directory = root / "compaction" / TOPIC / "0"
    return [n for n in os.listdir(directory) if n.endswith(".clog")] if directory.is_dir() else []


def test_a_slave_compacts_its_copy_of_a_compacted_topic(tmp_path, namesrv):
    settings = ("compactionScheduleInternal=100",)
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH", kafka=True,
                                     slave_settings=settings)
    master.broker.settings = (*master.broker.settings, "compactionScheduleInternal=3600000")
    master.broker.start()
    slave_started = False
    try:
        bootstrap = f"127.0.0.1:{master.kafka_port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(2000):
            producer.produce(TOPIC, b"v%d" % i, b"k%d" % (i % 20), partition=0)
        assert producer.flush(30) == 0
        slave.broker.start()
        slave_started = True
        wait_for(lambda: runtime(slave.addr).get("haSlaveLagBytes") == "0", what="the slave caught up")
        whole = f"{2000:020d}.clog"  # a compacted log of offsets up to 2000: the whole partition
        wait_for(lambda: whole in _compacted_log(slave.root), timeout=60, what="the slave's compacted log")
        assert not _compacted_log(master.root)  # the master's pass is an hour away
    finally:
        if slave_started:
            slave.broker.stop()
        master.broker.stop()
    snap = latest_snapshot(str(slave.root / "compaction" / TOPIC / "0"))
    assert snap is not None and snap.messages == 20 and snap.end == 2000
    assert list(snap.index.lasts)[-1] == 1999
    snap.close()
