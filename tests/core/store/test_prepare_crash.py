"""SIGKILL while topics are being created and their files prepared: the store reopens, no
temporary file is left, and every acknowledged message is there."""

import asyncio
import os
import random
import signal
import subprocess
import sys
import time

from rocketport.core.broker import Broker
from rocketport.core.store.segment_preparer import SUFFIX

from .prepare_crash_child import QUEUES, config

CHILD = os.path.join(os.path.dirname(__file__), "prepare_crash_child.py")


def _run_cycle(root: str, cycle: int, rng: random.Random) -> list[str]:
    """Runs one child until a random moment, SIGKILLs it, and returns the topics it
    acknowledged. Only whole lines count: a read may end inside one."""
    proc = subprocess.Popen([sys.executable, CHILD, root, str(cycle)], stdout=subprocess.PIPE)
    fd = proc.stdout.fileno()  # read with os.read only: a buffered reader could hold bytes back
    try:
        received = bytearray()
        while not received.startswith(b"ready\n"):
            chunk = os.read(fd, 65536)
            assert chunk, "the child ended before it was ready"
            received += chunk
        del received[:6]
        os.set_blocking(fd, False)
        deadline = time.monotonic() + rng.uniform(0.05, 0.6)
        while time.monotonic() < deadline:
            try:
                received += os.read(fd, 65536)
            except BlockingIOError:
                time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        os.set_blocking(fd, True)
        while chunk := os.read(fd, 65536):
            received += chunk
        return received[:received.rfind(b"\n") + 1].decode().split()
    finally:
        if proc.poll() is None:
            proc.kill()


def _check(root: str, acked: list[str]) -> None:
    async def main():
        async with Broker(config(root)) as broker:
            for topic in acked:
                n = int(topic.split("x")[1])
                found = [m.body for m in broker.get_messages(topic, n % QUEUES, 0, 4).messages()]
                assert found == [topic.encode()], f"acknowledged message of {topic} lost"
    asyncio.run(main())
    leftovers = [name for _, _, names in os.walk(root) for name in names if name.endswith(SUFFIX)]
    assert leftovers == []


def test_sigkill_while_preparing_queue_files(tmp_path):
    rng = random.Random(4321)
    root = str(tmp_path / "store")
    acked: list[str] = []
    for cycle in range(6):
        acked += _run_cycle(root, cycle, rng)
        _check(root, acked)
    assert acked
