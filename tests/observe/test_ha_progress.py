"""A slave copying a backlog from its master says where it is (a log line every
PROGRESS_INTERVAL_S, made 0 here: every full frame after the first), how far behind the
master's log end it last learnt, and when it has caught up: a master and a slave Broker in
one process over a loopback HA port."""

from __future__ import annotations

import logging
import re

from rocketport.core.broker import Broker
from rocketport.core.facade import replica
from rocketport.core.ha import slave as ha_slave
from tests.ha.test_replica_store import caught_up, configs, fill
from tests.support.aio import run
from tests.support.remoting import free_port

PROGRESS = re.compile(r"HA: catching up from master (\S+): CommitLog offset (\d+), ([\d.]+) MB copied, "
                      r"([\d.]+) MB/s(?:, at least (\d+) bytes behind \(the master's log end \d+ s ago\))?")
DONE = re.compile(r"HA: caught up with master (\S+) at CommitLog offset (\d+): ([\d.]+) MB in ([\d.]+) s, "
                  r"([\d.]+) MB/s")


def test_a_slave_catching_up_logs_its_progress_and_its_end(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(ha_slave, "PROGRESS_INTERVAL_S", 0.0)
    caplog.set_level(logging.INFO, logger=ha_slave.__name__)
    ha_port = free_port()
    mc, sc = configs(tmp_path, ha_port)  # 4 KiB frames, 256 KiB segments

    async def scenario() -> int:
        async with Broker(mc) as master:
            await fill(master, 600)  # about 240 KB before the slave starts: a backlog
            async with Broker(sc) as slave:
                # what SlaveSynchronize learns over remoting every 10 s (none in process)
                replica.apply_master_log_end(slave, str(master.store.commitlog.max_offset))
                await caught_up(master, slave)
                return master.store.commitlog.max_offset
    end = run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == ha_slave.__name__]
    progress = [PROGRESS.fullmatch(line) for line in lines if line.startswith("HA: catching up")]
    assert len(progress) > 10 and all(progress), lines[:5]
    offsets = [int(m[2]) for m in progress]
    assert offsets == sorted(offsets) and offsets[-1] <= end
    assert all(m[1] == f"127.0.0.1:{ha_port}" for m in progress)
    assert float(progress[-1][3]) > 0 and float(progress[-1][4]) > 0
    behind = [(int(m[2]), int(m[5])) for m in progress if m[5] is not None]
    assert len(behind) > 5 and all(offset + left == end for offset, left in behind)
    done = [DONE.fullmatch(line) for line in lines if line.startswith("HA: caught up")]
    assert len(done) == 1 and done[0] is not None, lines[-5:]
    assert int(done[0][2]) == end
