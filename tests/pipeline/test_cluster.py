"""The `rocketport` source on a Spark standalone cluster (a master and two workers on
loopback, tests/pipeline/cluster.py), driven by a driver process of its own: one Spark
partition per queue, run on both workers, rows equal to what was produced; the `tags`
option filters in the broker there too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rocketport.client import Message
from rocketport.pipeline.cluster import start_cluster
from tests.pipeline.conftest import create_topic, produce
from tests.support.processes import REPO


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield running
    finally:
        running.stop()


def test_partitions_run_on_both_workers(cluster, broker):
    create_topic(broker, "SparkCluster", 4)
    produce(broker, [Message("SparkCluster", b"c%03d" % i, tags="A" if i % 4 == 0 else "B") for i in range(400)])
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-m", "tests.pipeline.cluster_driver", cluster.master_url,
                           broker.namesrv, "SparkCluster"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["executors"] == 2 and got["partitions"] == 4
    queues = [q for q, _ in got["placed"]]
    assert sorted(queues) == [0, 1, 2, 3]  # each queue read once, by one task
    dirs = {d for _, d in got["placed"]}
    assert {next(str(w) for w in cluster.work_dirs if d.startswith(str(w))) for d in dirs} == {
        str(w) for w in cluster.work_dirs}  # on both workers
    assert got["values"] == ["c%03d" % i for i in range(400)]
    assert got["tagged"] == ["c%03d" % i for i in range(0, 400, 4)]
    assert got["count_after_filter"] == [100, 400]
