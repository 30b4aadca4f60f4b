"""amqplib (npm) against a live broker, unchanged: installed once per test session from
tests/protocols/amqp/amqplib/package.json into a temporary folder, run with node."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.npm import npm_install

HERE = Path(__file__).parent / "amqplib"


@pytest.fixture(scope="session")
def amqplib(tmp_path_factory) -> Path:
    return npm_install(HERE, tmp_path_factory.mktemp("amqplib"), "amqplib")


def test_confirms_topic_routing_prefetch_nack_and_acks(amqp_port, amqplib):
    proc = subprocess.run(["node", str(HERE / "client.js"), f"amqp://guest:guest@127.0.0.1:{amqp_port}/", "10"],
                          env=dict(os.environ, NODE_PATH=str(amqplib)), capture_output=True, text=True,
                          timeout=90)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines[-1] == {"done": 10}
    deliveries = lines[:-1]
    assert sorted({d["body"] for d in deliveries}) == sorted(f"js-{i}" for i in range(10))
    assert len(deliveries) == 11, "the nacked one came back once"
    again = [d for d in deliveries if d["redelivered"]]
    assert len(again) == 1 and again[0]["body"] == deliveries[0]["body"]
    first = next(d for d in deliveries if d["body"] == "js-3")
    assert first["routingKey"] == "js.item.3" and first["exchange"] == "js-events"
    assert first["correlationId"] == "c-3" and first["contentType"] == "text/plain"
    assert first["headers"] == {"n": "3"}
