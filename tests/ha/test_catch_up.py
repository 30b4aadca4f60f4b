"""A slave far behind catches up, and one SIGKILLed mid-stream resumes from its own log's end
(recovery cuts its torn tail): real processes, the slave's CommitLog byte-identical to the
master's at the end. The default suite copies 16 MB; the slow one 128 MB."""

from __future__ import annotations

import asyncio

import pytest

from rocketport.client import Message, Producer
from tests.ha.cluster import log_digest, log_end, master_and_slave, wait_for
from tests.ha.test_sync_master import runtime

TOPIC = "CatchUp"


async def load(namesrv: str, megabytes: int) -> None:
    body = b"z" * 1024
    async with Producer(namesrv, "catch-up-loader") as producer:
        batches = iter(range(megabytes * 4))  # 256 KiB a batch

        async def worker() -> None:
            for _ in batches:
                await producer.send_batch([Message(TOPIC, body) for _ in range(256)])
        await asyncio.gather(*(worker() for _ in range(4)))


def slave_offset(addr: str) -> int:
    return int(runtime(addr).get("haSlaveOffset", "-1"))


@pytest.mark.parametrize("megabytes", [16, pytest.param(128, marks=pytest.mark.slow)])
def test_a_slave_far_behind_catches_up_and_resumes_after_a_sigkill(tmp_path, namesrv, megabytes):
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH")
    master.broker.start()
    started = False
    try:
        asyncio.run(load(namesrv, megabytes))
        end = int(runtime(master.addr)["commitLogMaxOffset"])
        assert end >= megabytes << 20
        slave.broker.start()
        started = True
        wait_for(lambda: slave_offset(slave.addr) > 0, what="the slave copying")
        slave.broker.kill()  # mid-stream when the copy takes longer than the poll (128 MB does)
        slave.broker.start()
        resumed = slave_offset(slave.addr)
        assert 0 < resumed <= end
        wait_for(lambda: slave_offset(slave.addr) == end, timeout=120, what="the slave caught up")
    finally:
        if started:
            slave.broker.stop()
        master.broker.stop()
    assert log_end(slave.root) == end == log_end(master.root)
    assert log_digest(slave.root, end) == log_digest(master.root, end)
