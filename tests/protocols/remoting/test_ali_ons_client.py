"""ali-ons 3.12.0 (npm, pure JavaScript) against a live broker, unchanged.

The client is installed once per test session from interop/ali_ons/package.json into a
temporary folder (no global install); scripts run with node in subprocesses. Topics are
created first, as with a real RocketMQ name server (ali-ons does not fall back to TBW102).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.live_broker import start_live_broker
from tests.support.npm import npm_install

INTEROP = Path(__file__).parents[3] / "interop" / "ali_ons"


@pytest.fixture(scope="session")
def ali_ons(tmp_path_factory) -> Path:
    return npm_install(INTEROP, tmp_path_factory.mktemp("ali-ons"), "ali-ons")


def node(modules: Path, *args: str, timeout: float = 90, expect: int = 0,
         env: dict[str, str] | None = None, stderr_has: str = "") -> list[dict]:
    env = dict(os.environ, NODE_PATH=str(modules), **(env or {}))
    proc = subprocess.run(["node", str(INTEROP / "client.js"), *args], env=env, timeout=timeout,
                          capture_output=True, text=True)
    assert proc.returncode == expect, f"node {args[0]} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert stderr_has in proc.stderr, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_produce_and_push_consume_with_tags(live_broker, ali_ons):
    live_broker.call(live_broker.server.broker.create_topic, "JsTopic")
    ns = live_broker.namesrv
    sent = node(ali_ons, "produce", ns, "JsTopic", "8", "TagA", "a-")
    assert {r["status"] for r in sent} == {"SEND_OK"}
    node(ali_ons, "produce", ns, "JsTopic", "4", "TagB", "b-")
    got = node(ali_ons, "consume", ns, "JsTopic", "JsGroup", "8", "TagA")
    assert {m["body"] for m in got} == {f"a-{i}" for i in range(8)}
    assert {m["tags"] for m in got} == {"TagA"}


def test_offsets_survive_a_consumer_restart(live_broker, ali_ons):
    live_broker.call(live_broker.server.broker.create_topic, "JsOffsets")
    ns = live_broker.namesrv
    node(ali_ons, "produce", ns, "JsOffsets", "6", "TagA", "first-")
    first = node(ali_ons, "consume", ns, "JsOffsets", "JsOffsetGroup", "6")
    assert {m["body"] for m in first} == {f"first-{i}" for i in range(6)}
    node(ali_ons, "produce", ns, "JsOffsets", "5", "TagA", "second-")
    second = node(ali_ons, "consume", ns, "JsOffsets", "JsOffsetGroup", "5")
    assert {m["body"] for m in second} == {f"second-{i}" for i in range(5)}


def test_failed_message_is_retried_then_succeeds(live_broker, ali_ons):
    live_broker.call(live_broker.server.broker.create_topic, "JsRetry")
    ns = live_broker.namesrv
    node(ali_ons, "produce", ns, "JsRetry", "3", "TagA", "r-")
    got = node(ali_ons, "consume", ns, "JsRetry", "JsRetryGroup", "3", "*", "1", "60")
    failed = [m for m in got if m["failed"]]
    succeeded = [m for m in got if not m["failed"]]
    assert {m["body"] for m in failed} == {f"r-{i}" for i in range(3)}
    assert {m["body"] for m in succeeded} == {f"r-{i}" for i in range(3)}
    assert all(m["reconsumeTimes"] >= 1 for m in succeeded)


def test_sql92_subscription(live_broker, ali_ons):
    live_broker.call(live_broker.server.broker.create_topic, "JsSql")
    ns = live_broker.namesrv
    node(ali_ons, "produce", ns, "JsSql", "10", "TagA", "s-")
    got = node(ali_ons, "consume", ns, "JsSql", "JsSqlGroup", "3", "seq IN ('2', '5', '7')",
               "0", "60", "sql")
    assert {m["body"] for m in got} == {"s-2", "s-5", "s-7"}


def test_retries_beyond_the_limit_land_in_the_dlq(live_broker, ali_ons):
    broker = live_broker.server.broker
    live_broker.call(broker.create_topic, "JsDlq")
    ns = live_broker.namesrv
    node(ali_ons, "produce", ns, "JsDlq", "2", "TagA", "d-")
    # always fails; the script's consumer allows 2 reconsumes, so the third failure sends
    # the message to %DLQ%JsDlqGroup through CONSUMER_SEND_MSG_BACK
    got = node(ali_ons, "consume", ns, "JsDlq", "JsDlqGroup", "2", "*", "99", "20", expect=1)
    assert {(m["body"], m["reconsumeTimes"]) for m in got} >= {(f"d-{i}", t) for i in range(2) for t in range(3)}
    dlq = "%DLQ%JsDlqGroup"
    assert live_broker.call(lambda: broker.max_offset(dlq, 0)) == 2
    bodies = live_broker.call(lambda: [m.body for m in broker.store.get_messages(dlq, 0, 0, 10).messages()])
    assert sorted(bodies) == [b"d-0", b"d-1"]


def test_signed_requests_under_acl_and_a_wrong_secret_is_refused(acl_config, ali_ons, caplog):
    """ali-ons reports a refused send only as "still failed": the broker's log names why."""
    caplog.set_level(logging.INFO, logger="rocketport.protocols.remoting.acl_hook")
    live = start_live_broker(acl_config)
    try:
        live.call(live.server.broker.create_topic, "Open")
        live.call(live.server.broker.create_topic, "Closed")
        ns = live.namesrv
        signed = {"ACCESS_KEY": "app", "SECRET_KEY": "app-secret"}
        sent = node(ali_ons, "produce", ns, "Open", "3", "TagA", "acl-", env=signed)
        assert {r["status"] for r in sent} == {"SEND_OK"}
        got = node(ali_ons, "consume", ns, "Open", "JsAclGroup", "3", env=signed)
        assert {m["body"] for m in got} == {f"acl-{i}" for i in range(3)}
        refused = node(ali_ons, "produce", ns, "Open", "1", "TagA", "x-", expect=2,
                       env={"ACCESS_KEY": "app", "SECRET_KEY": "not-the-secret"}, stderr_has="still failed")
        assert refused == []
        assert "refused: Check signature failed for accessKey=app" in caplog.text
        node(ali_ons, "produce", ns, "Closed", "1", expect=2, env=signed, stderr_has="still failed")
        assert "refused: No permission for topic Closed (accessKey=app)" in caplog.text
        assert live.call(lambda: [live.server.broker.max_offset("Closed", q) for q in range(8)]) == [0] * 8
    finally:
        live.stop()
