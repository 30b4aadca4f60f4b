"""Pending delays, half messages and retries survive a SIGKILL of a real broker process:
after restart every acknowledged message is delivered (at-least-once) and none early."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from rocketport.core.broker import Broker

from .crash_child import config

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")


def _run_child(root: str, mode: str, seconds: float) -> list[list[str]]:
    proc = subprocess.Popen([sys.executable, CHILD, root, mode], stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    lines: list[list[str]] = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.split())
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
    lines += [line.split() for line in rest.splitlines() if line.strip()]
    return lines


async def _drain(broker: Broker, topic: str, want: set[int], timeout_s: float) -> list:
    """Every message of ``topic`` queue 0 until all of ``want`` were seen."""
    seen: list = []
    offset = 0
    deadline = time.monotonic() + timeout_s
    while not want <= {int(m.body.split()[0]) for m in seen}:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r = await broker.pull("check", topic, 0, offset, 256, hold_s=min(left, 0.5))
        seen += list(r.messages())
        offset = r.next_begin_offset
    return seen


@pytest.mark.parametrize("seed", [1, 2])
def test_pending_delays_survive_sigkill(tmp_path, seed):
    root = str(tmp_path / "store")
    acked = {int(s): int(t) for s, t in _run_child(root, "delay", random.Random(seed).uniform(0.3, 1.5))}
    assert acked

    async def main():
        async with Broker(config(root)) as broker:
            seen = await _drain(broker, "D", set(acked), 6)
        return seen

    seen = asyncio.run(main())
    delivered = {int(m.body.split()[0]) for m in seen}
    assert set(acked) <= delivered, sorted(set(acked) - delivered)[:10]
    for m in seen:  # never early: stored in D at least one level (1 s) after it was sent
        sent = int(m.body.split()[1])
        assert m.store_timestamp >= sent + 1000
        assert "DELAY" not in m.properties and "REAL_TOPIC" not in m.properties


def test_half_messages_survive_sigkill_and_are_checked(tmp_path):
    root = str(tmp_path / "store")
    acked = {int(s) for (s,) in _run_child(root, "tx", 0.6)}
    assert acked

    async def main():
        async with Broker(config(root)) as broker:
            assert broker.max_offset("X", 0) == 0  # nothing visible before an answer
            asked: list[tuple[str, int]] = []

            def checker(group, half):
                asked.append((group, half.commit_log_offset))
                asyncio.get_running_loop().create_task(
                    broker.end_transaction(group, half.commit_log_offset, True, from_check=True))
                return True

            broker.add_transaction_checker(checker)
            seen = await _drain(broker, "X", acked, 6)
            assert all(group == "P" for group, _ in asked)
            return seen

    seen = asyncio.run(main())
    delivered = {int(m.body.split()[0]) for m in seen}
    assert acked <= delivered, sorted(acked - delivered)[:10]
    for m in seen:
        assert "TRAN_MSG" not in m.properties and "REAL_TOPIC" not in m.properties


def test_retries_survive_sigkill(tmp_path):
    root = str(tmp_path / "store")
    acked = {int(s) for (s,) in _run_child(root, "retry", 0.6)}
    assert acked

    async def main():
        async with Broker(config(root)) as broker:
            return await _drain(broker, "%RETRY%G", acked, 6)

    seen = asyncio.run(main())
    delivered = {int(m.body.split()[0]) for m in seen}
    assert acked <= delivered, sorted(acked - delivered)[:10]
    for m in seen:
        assert m.properties["RETRY_TOPIC"] == "R" and m.reconsume_times == 1
        assert m.store_timestamp >= int(m.body.split()[1]) + 1000
