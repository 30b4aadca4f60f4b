"""A store opens its ConsumeQueues without mapping them (each is mapped on first use; its
end is found by reading, the checkpoint saying where to look): after a SIGKILL of a real
process whose checkpoint is behind its queues, and after a crash that left an empty
segment file, every queue still reads back exactly what was acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from rocketport.common.message import Message
from rocketport.core.store.message_store import MessageStore

from tests.core.store.helpers import drain, open_store, run

from .lazy_open_child import ENTRIES_PER_FILE, QUEUES, body, config

CHILD = os.path.join(os.path.dirname(__file__), "lazy_open_child.py")


def _mapped_queue_files(cq_root: str) -> set[str]:
    """ConsumeQueue files this process maps now (/proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        return {line.split(None, 5)[5].strip() for line in maps
                if len(line.split(None, 5)) == 6 and line.split(None, 5)[5].startswith(cq_root + os.sep)}


def _killed_child(root: str) -> dict[tuple[str, int], int]:
    proc = subprocess.Popen([sys.executable, CHILD, root], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(CHILD))))
    counts: dict[tuple[str, int], int] = {}
    try:
        for _ in range(1000):
            line = proc.stdout.readline()
            if not line or line.strip() == "ready":
                break
            topic, queue, n = line.split()
            counts[(topic, int(queue))] = int(n)
        assert line.strip() == "ready", "the child ended before it was ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    return counts


def test_queues_opened_lazily_recover_everything_after_sigkill(tmp_path):
    root = str(tmp_path / "store")
    counts = _killed_child(root)
    assert max(counts.values()) > 2 * ENTRIES_PER_FILE  # some queues span several segments
    cfg = config(root)

    async def main():
        async with open_store(cfg) as store:
            assert store.recovered_from_crash
            assert store.recovery_report["reason"] == "checkpoint"
            # mapped by the open: only the queues recovery re-dispatched into (those written
            # after the checkpoint), not the others
            past = {os.path.join(store.cq_root, f"Lazy{q % 6}", str(q // 6)) for q in range(0, QUEUES, 3)}
            mapped = _mapped_queue_files(store.cq_root)
            assert {os.path.dirname(path) for path in mapped} <= past
            for (topic, queue), n in counts.items():
                got = drain(store, topic, queue)
                assert got == [(i, body(topic, queue, i)) for i in range(n)], (topic, queue)
                assert store.max_offset(topic, queue) == n
            # a queue written after the open maps its last segment then, and goes on from its end
            topic, queue = max(counts, key=counts.get)
            n = counts[(topic, queue)]
            result = await store.put_message(Message(topic, b"after", queue_id=queue))
            assert result.queue_offset == n
            assert drain(store, topic, queue, n) == [(n, b"after")]
            counts[(topic, queue)] = n + 1
        # a clean restart: the checkpoint now names every end, and it still reads back alike
        async with open_store(cfg) as store:
            assert not store.recovered_from_crash
            assert _mapped_queue_files(store.cq_root) == set()  # nothing mapped by the open
            for (topic, queue), n in counts.items():
                assert store.max_offset(topic, queue) == n
                assert drain(store, topic, queue)[-1][0] == n - 1

    run(main())


def test_an_empty_segment_left_by_a_crash_is_dropped_at_open(tmp_path, small_config):
    async def main():
        async with open_store(small_config) as store:
            for i in range(3):
                await store.put_message(Message("Empty", b"m%d" % i, queue_id=0))
            directory = store.consume_queues[("Empty", 0)].directory
        # a SIGKILL between creating the next segment and sizing it leaves it empty
        entries = small_config.mapped_file_size_consume_queue // 20
        empty = os.path.join(directory, f"{entries * 20:020d}")
        open(empty, "wb").close()
        async with open_store(small_config) as store:
            assert not os.path.exists(empty)
            assert drain(store, "Empty", 0) == [(0, b"m0"), (1, b"m1"), (2, b"m2")]
            await store.put_message(Message("Empty", b"m3", queue_id=0))
            assert drain(store, "Empty", 0, 3) == [(3, b"m3")]

    run(main())


def test_a_segment_of_another_size_is_refused_at_open(tmp_path, small_config):
    async def main():
        async with open_store(small_config) as store:
            await store.put_message(Message("Sized", b"m", queue_id=0))
            directory = store.consume_queues[("Sized", 0)].directory
        with open(os.path.join(directory, f"{0:020d}"), "r+b") as f:
            f.truncate(small_config.mapped_file_size_consume_queue // 2)
        store = MessageStore(small_config)
        try:
            store.open()
        except ValueError as exc:
            assert "configured segment size" in str(exc)
        else:
            raise AssertionError("a segment of another size was loaded")
        finally:
            store.close()

    run(main())


def test_first_entries_are_written_without_mapping_the_queue_files(tmp_path, small_config):
    """A put into a new queue opens its file and pwrites the entry (no mapping, no fault);
    a queue written more than a few times is mapped, and every entry reads back."""
    async def main():
        async with open_store(small_config) as store:
            for q in range(40):
                await store.put_message(Message(f"First{q % 10}", b"m%d" % q, queue_id=q // 10))
            assert _mapped_queue_files(store.cq_root) == set()
            for i in range(1, 30):  # past UNMAPPED_PUTS puts into one queue: it is mapped
                await store.put_message(Message("First0", b"more%d" % i, queue_id=0))
            hot = os.path.join(store.cq_root, "First0", "0")
            assert {os.path.dirname(path) for path in _mapped_queue_files(store.cq_root)} == {hot}
            for q in range(40):
                topic, queue = f"First{q % 10}", q // 10
                expected = [(0, b"m%d" % q)] + ([(i, b"more%d" % i) for i in range(1, 30)] if q == 0 else [])
                assert drain(store, topic, queue) == expected

    run(main())
