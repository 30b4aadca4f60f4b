"""The Java client (kafka-clients, what Kafka Streams restores state stores with) reads a
compacted topic from its beginning to its end offset: the latest value of every key at its
original offset, batches that compaction rewrote (offset gaps inside them) included, and
tombstones while delete.retention.ms keeps them. java/CompactedRead.java is compiled with the
system javac; the jars come from scripts/install-test-deps (KAFKA_JAVA_LIB names another
directory)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.protocols.kafka.compaction_support import broker, compact, create_compacted, latest, produce  # noqa: F401
from tests.protocols.kafka.java_support import LIB, compile_java


@pytest.fixture(scope="module")
def classes(tmp_path_factory) -> Path:
    return compile_java(tmp_path_factory.mktemp("java"), "CompactedRead")


def test_the_java_client_restores_a_compacted_changelog(broker, classes):  # noqa: F811
    create_compacted(broker, "java-changelog")
    items = [(b"k%d" % (i % 40), b"v%d" % i) for i in range(2000)] + [(b"k5", None)]
    produce(broker, "java-changelog", items, **{"compression.type": "zstd"})
    assert compact(broker) == 1
    result = subprocess.run(["java", "-cp", f"{classes}:{LIB}/*", "CompactedRead", broker.bootstrap, "java-changelog"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split("\n")
    end = [line for line in lines if line.startswith("END ")]
    assert end == ["END 40 2001"]
    got = {}
    for line in lines:
        if line and not line.startswith("END "):
            offset, key, value = line.split(" ")
            got[key.encode()] = (int(offset), None if value == "-" else value.encode())
    assert got == latest(items)
