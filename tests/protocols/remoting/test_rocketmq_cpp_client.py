"""The PyPI `rocketmq` 0.4.4 client (C++ client 1.x) against a live broker, unchanged.

Each client runs in a subprocess (interop/rocketmq_py/client.py) with HOME pointed at a
temporary directory (the C++ client writes its logs under $HOME/logs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.client", reason="needs the rocketmq test extra")

CLIENT = Path(__file__).parents[3] / "interop" / "rocketmq_py" / "client.py"


def run_client(home: Path, *args: str, timeout: float = 90) -> list[dict]:
    env = dict(os.environ, HOME=str(home))
    proc = subprocess.run([sys.executable, str(CLIENT), *args], env=env, timeout=timeout,
                          capture_output=True, text=True)
    # the C++ client 1.x can abort inside its own shutdown, after its work is done and
    # printed (apache/rocketmq-client-cpp#204, #335): what it printed is still judged
    aborted_in_shutdown = proc.returncode == -6 and "boost::thread_interrupted" in proc.stderr
    assert proc.returncode == 0 or aborted_in_shutdown, \
        f"client {args[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_sync_send_then_push_consume_with_tag_filter(live_broker, tmp_path):
    ns = live_broker.namesrv
    sent = run_client(tmp_path, "produce", ns, "OrdersTopic", "12", "--tag", "TagA",
                      "--body-prefix", "a-")
    assert [r["status"] for r in sent] == [0] * 12
    run_client(tmp_path, "produce", ns, "OrdersTopic", "7", "--tag", "TagB", "--body-prefix", "b-")
    got = run_client(tmp_path, "push", ns, "OrdersTopic", "GroupTagA", "12", "--expr", "TagA",
                     "--timeout", "60", "--linger", "3")
    # at-least-once: a rebalance may redeliver, but only TagA messages, and all of them
    assert {m["body"] for m in got} == {f"a-{i}" for i in range(12)}
    assert {m["tags"] for m in got} == {"TagA"}


def test_oneway_and_batch_send_then_pull_consumer(live_broker, tmp_path):
    ns = live_broker.namesrv
    run_client(tmp_path, "produce", ns, "BulkTopic", "5", "--mode", "oneway", "--body-prefix", "o-")
    batch = run_client(tmp_path, "produce", ns, "BulkTopic", "6", "--mode", "batch",
                       "--body-prefix", "b-")
    assert batch[0]["status"] == 0
    got = run_client(tmp_path, "pull", ns, "BulkTopic", "PullGroup", "11", "--timeout", "40")
    assert {m["body"] for m in got} == ({f"o-{i}" for i in range(5)} |
                                        {f"b-{i}" for i in range(6)})
    by_queue = defaultdict(list)
    for m in got:
        by_queue[m["queue_id"]].append(m["queue_offset"])
    assert all(offsets == sorted(offsets) for offsets in by_queue.values())


def test_orderly_send_and_orderly_consumer_keep_queue_order(live_broker, tmp_path):
    ns = live_broker.namesrv
    sent = run_client(tmp_path, "produce", ns, "FifoTopic", "30", "--mode", "orderly")
    assert {r["status"] for r in sent} == {0}
    got = run_client(tmp_path, "push", ns, "FifoTopic", "FifoGroup", "30", "--orderly",
                     "--timeout", "60")
    by_queue = defaultdict(list)
    for m in got:
        by_queue[m["queue_id"]].append(int(m["body"].split("-")[1]))
    assert len(by_queue) == 3  # the selector spreads i % 3 over three queues
    for bodies in by_queue.values():
        assert bodies == sorted(bodies), "messages of one queue interleaved"
    assert sorted(sum(by_queue.values(), [])) == list(range(30))


def test_async_send_with_compressed_bodies_round_trips(live_broker, tmp_path):
    ns = live_broker.namesrv
    # bodies over 4 KiB are zlib-compressed by the client (sysFlag bit 0) and must reach the
    # consumer through the broker untouched
    sent = run_client(tmp_path, "produce", ns, "AsyncTopic", "10", "--mode", "async",
                      "--body-size", "6000", "--body-prefix", "z-")
    assert [r["status"] for r in sent] == [0] * 10
    got = run_client(tmp_path, "push", ns, "AsyncTopic", "AsyncGroup", "10", "--timeout", "60")
    assert {m["body"] for m in got} == {f"z-{i}" for i in range(10)}
    broker = live_broker.server.broker

    def stored_flags() -> set[int]:
        return {m.sys_flag & 1 for q in range(8)
                for m in broker.get_messages("AsyncTopic", q, 0, 32).messages()}
    assert live_broker.call(stored_flags) == {1}  # stored compressed, as sent


def test_batch_over_4kib_which_the_client_compresses_is_stored_per_message(live_broker, tmp_path):
    """The C++ client zlib-compresses a batch body over 4 KiB whole (sysFlag COMPRESSED on
    the batch request): the broker inflates it and stores each message plain."""
    ns = live_broker.namesrv
    batch = run_client(tmp_path, "produce", ns, "BigBatchTopic", "60", "--mode", "batch",
                       "--body-size", "200", "--body-prefix", "z-")
    assert batch[0]["status"] == 0
    got = run_client(tmp_path, "pull", ns, "BigBatchTopic", "BigBatchGroup", "60", "--timeout", "40")
    assert sorted(m["body"] for m in got) == sorted(f"z-{i}".ljust(200, ".") for i in range(60))
