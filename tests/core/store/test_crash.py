"""Crash safety with real processes: SIGKILL a SYNC_FLUSH writer at random moments.

Every acknowledged message must be readable and intact after restart, nothing corrupt may
ever be served, and queue offsets must stay dense.
"""

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import zlib

import pytest

from rocketport.core.store.message_store import MessageStore

from .crash_child import QUEUES, body_for, config, key_for

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")


def _run_cycle(root: str, cycle: int, rng: random.Random) -> dict[tuple[int, int], int]:
    proc = subprocess.Popen([sys.executable, CHILD, root, str(cycle)], stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    acked: dict[tuple[int, int], int] = {}
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + rng.uniform(0.05, 0.6)
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            q, off, crc = map(int, line.split())
            acked[(q, off)] = crc
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
    # acks already written to the pipe before the kill count too
    for line in rest.splitlines():
        parts = line.split()
        if len(parts) == 3:
            acked[(int(parts[0]), int(parts[1]))] = int(parts[2])
    return acked


def _check_store(root: str, acked: dict[tuple[int, int], int]) -> int:
    store = MessageStore(config(root))
    store.open()
    try:
        total = 0
        for q in range(QUEUES):
            expected = 0
            offset = 0
            for _ in range(100_000):
                res = store.get_messages("C", q, offset, 256)
                if not res.message_count:
                    break
                for m in res.messages():
                    assert m.queue_offset == expected, "offsets are not dense"
                    cycle = int.from_bytes(m.body[0:4], "big")
                    seq = int.from_bytes(m.body[4:8], "big")
                    assert int.from_bytes(m.body[8:10], "big") == q
                    assert m.body == body_for(cycle, seq, q), "a corrupt message was served"
                    expected += 1
                offset = res.next_begin_offset
            assert store.max_offset("C", q) == expected
            for (aq, aoff), crc in acked.items():
                if aq == q:
                    assert aoff < expected, f"acknowledged message {aq}/{aoff} lost"
            total += expected
        # acknowledged bodies are exactly what was acknowledged
        for (q, off), crc in acked.items():
            res = store.get_messages("C", q, off, 1)
            (m,) = list(res.messages())
            assert zlib.crc32(m.body) == crc
        return total
    finally:
        store.close()


def _check_keys(root: str, acked: dict[tuple[int, int], int], rng: random.Random) -> None:
    """Once the restarted store's index has caught up, acknowledged messages are found by
    their keys (index files roll every 4,096 keys here, so a kill leaves headers behind
    the entries written after the last checkpoint)."""
    async def main() -> None:
        store = MessageStore(config(root))
        store.open()
        await store.start()
        try:
            for _ in range(1000):
                if store.index.built_offset >= store.dispatched_offset:
                    break
                await asyncio.sleep(0.01)
            assert store.index.built_offset >= store.dispatched_offset, "the index did not catch up"
            for q, off in rng.sample(sorted(acked), min(200, len(acked))):
                (m,) = list(store.get_messages("C", q, off, 1).messages())
                found = store.query_by_key("C", key_for(m.body))
                assert [f.body for f in found] == [m.body], f"message {q}/{off} not found by its key"
        finally:
            await store.stop()
    asyncio.run(main())


def _crash_cycles(tmp_path, cycles: int, seed: int) -> None:
    rng = random.Random(seed)
    root = str(tmp_path / "store")
    all_acked: dict[tuple[int, int], int] = {}
    previous = 0
    for cycle in range(cycles):
        acked = _run_cycle(root, cycle, rng)
        assert not acked.keys() & all_acked.keys(), "an acknowledged offset was handed out twice"
        all_acked.update(acked)
        total = _check_store(root, all_acked)
        _check_keys(root, all_acked, rng)
        assert total >= previous, "messages disappeared between cycles"
        previous = total
    assert previous > 0 and len(all_acked) > 0


def test_sigkill_cycles(tmp_path):
    _crash_cycles(tmp_path, cycles=20, seed=1234)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sigkill_cycles_long(tmp_path):
    _crash_cycles(tmp_path, cycles=120, seed=98765)
