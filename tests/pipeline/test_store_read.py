"""The offline `rocketport-store` reader: a stopped broker's store directory read by Spark
equals what the broker served for it."""

from __future__ import annotations

import dataclasses

from rocketport.client import Message
from rocketport.core.config import BrokerConfig
from tests.pipeline.conftest import create_topic, produce
from tests.support.live_broker import start_live_broker
from tests.support.remoting import free_port

COLUMNS = ["topic", "queue_id", "offset", "key", "value", "tags", "keys", "born_timestamp",
           "store_timestamp", "msg_id", "reconsume_times"]


def rows(df):
    return sorted(tuple(r) + (tuple(sorted(r.properties.items())),)
                  for r in df.select(*COLUMNS, "properties").collect())


def test_offline_read_equals_the_brokers_content(spark, pipeline_config: BrokerConfig, tmp_path):
    # a broker of its own with 256 KiB segments, so the log spans several segment files
    config = dataclasses.replace(pipeline_config, store_path_root_dir=str(tmp_path / "store"),
                                 mapped_file_size_commit_log=256 * 1024, listen_port=free_port())
    live = start_live_broker(config)
    try:
        create_topic(live, "Audited", 3)
        create_topic(live, "Other", 1)
        produce(live, [Message("Audited", b"a%05d" % i + b"." * (i % 700), tags="t%d" % (i % 4),
                               keys=[f"k{i}"], properties={"i": str(i)}) for i in range(3000)])
        produce(live, [Message("Other", b"o%d" % i) for i in range(100)])
        # and one compressed body (the client compresses over 4 KiB)
        produce(live, [Message("Audited", b"z" * 10_000, tags="big")])
        served = rows(spark.read.format("rocketport").option("namesrv", live.namesrv)
                      .option("topic", "Audited,Other").load())
    finally:
        live.stop()
    offline = spark.read.format("rocketport-store").load(str(tmp_path / "store"))
    assert offline.rdd.getNumPartitions() > 3  # one per segment
    assert rows(offline.filter("topic in ('Audited', 'Other')")) == served
    assert len(served) == 3101
    only = spark.read.format("rocketport-store").option("topic", "Other").load(str(tmp_path / "store"))
    assert only.count() == 100
