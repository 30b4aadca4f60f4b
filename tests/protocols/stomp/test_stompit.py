"""stompit (npm, Node.js) against a live broker, unchanged: installed per test session from
tests/protocols/stomp/stompit/package.json into a temporary folder, run with node in
subprocesses. Queues with headers and tags, transactions, NACK and redelivery."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.npm import npm_install

from .stomp_support import endpoint, stored

HERE = Path(__file__).parent / "stompit"


@pytest.fixture(scope="session")
def stompit(tmp_path_factory) -> Path:
    return npm_install(HERE, tmp_path_factory.mktemp("stompit"), "stompit")


def node(modules: Path, live, *args: str) -> list[dict]:
    host, port = endpoint(live)
    proc = subprocess.run(["node", str(HERE / "client.js"), args[0], host, str(port), *args[1:]],
                          env=dict(os.environ, NODE_PATH=str(modules)), timeout=90,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"node {args[0]} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_queue_with_headers_tags_and_a_nack(stomp_broker, stompit):
    node(stompit, stomp_broker, "produce", "/queue/js", "3", "x-tags=TagJ", "color=blue")
    got = node(stompit, stomp_broker, "consume", "/queue/js", "3", "--nack-first", "x-group=JsGroup")
    nacked = got[0]
    assert nacked["nacked"] == "m-0"
    received = {m["body"]: m["headers"] for m in got[1:]}
    assert set(received) == {"m-0", "m-1", "m-2"}
    assert received["m-0"]["redelivered"] == "true" and received["m-1"]["redelivered"] == "false"
    assert all(h["x-tags"] == "TagJ" and h["color"] == "blue" for h in received.values())


def test_transaction_commit(stomp_broker, stompit):
    node(stompit, stomp_broker, "produce", "/queue/jstx", "4", "--tx")
    assert sorted(m.body for m in stored(stomp_broker, "jstx")) == [b"m-%d" % i for i in range(4)]
