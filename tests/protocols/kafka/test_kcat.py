"""kcat (Debian's, bundling librdkafka 2.0.2, which checks single API versions) against a live broker.

Needs the `kcat` Debian package, installed by scripts/install-test-deps.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

def kcat(live, *args: str, data: bytes | None = None) -> bytes:
    assert shutil.which("kcat"), "kcat is not installed: run scripts/install-test-deps"
    result = subprocess.run(["kcat", "-b", live.bootstrap, *args], input=data, capture_output=True,
                            timeout=60, check=True)
    return result.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_and_consume(live_broker, codec):
    topic = f"kcat-{codec}"
    live_broker.run(lambda: live_broker.server.broker.create_topic(topic, read_queue_nums=1, write_queue_nums=1))
    lines = [f"key{i}:value {i}" for i in range(50)]
    kcat(live_broker, "-P", "-t", topic, "-p", "0", "-K", ":", "-z", codec, "-H", "tag=TagA",
         data="\n".join(lines).encode() + b"\n")
    out = kcat(live_broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %k:%s %h\n")
    assert out.decode().splitlines() == [f"{i} key{i}:value {i} tag=TagA" for i in range(50)]


def test_kcat_metadata(live_broker):
    live_broker.run(lambda: live_broker.server.broker.create_topic("kcat-meta", read_queue_nums=3,
                                                                    write_queue_nums=3))
    meta = json.loads(kcat(live_broker, "-L", "-J"))
    assert meta["brokers"][0]["name"].endswith(f":{live_broker.port}")
    topic = next(t for t in meta["topics"] if t["topic"] == "kcat-meta")
    assert len(topic["partitions"]) == 3
