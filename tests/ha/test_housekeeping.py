"""The master's HA housekeeping (core/ha/master.py `_housekeep`): a connection that stops
reporting is dropped after haHousekeepingInterval, while a slave that reports stays
connected through many intervals with nothing to replicate (heart-beat frames keep its
own silence check quiet), and replication goes on over it."""

from __future__ import annotations

import asyncio

from rocketport.core.broker import Broker
from rocketport.core.ha.codec import encode_report
from tests.ha.test_replica_store import caught_up, configs, fill
from tests.support.aio import run
from tests.support.remoting import free_port


def test_a_silent_connection_is_dropped_and_a_reporting_slave_is_kept(tmp_path):
    async def scenario() -> None:
        port = free_port()
        mc, sc = configs(tmp_path, port)
        for config in (mc, sc):  # haSendHeartbeatInterval, haHousekeepingInterval (ms)
            config.ha_send_heartbeat_interval, config.ha_housekeeping_interval = 100, 300
        async with Broker(mc) as master:
            await fill(master, 10)
            # one report (where to stream from), then silence: the master ends the connection
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_report(0))
            await writer.drain()
            streamed = await asyncio.wait_for(reader.read(), 10)  # to the end of the stream
            assert len(streamed) >= master.store.commitlog.max_offset  # the log came first
            writer.close()
            assert master.ha.master is not None
            async with Broker(sc) as slave:
                await caught_up(master, slave)
                assert slave.ha.slave is not None
                for _ in range(10):  # 1.5 s: five housekeeping intervals with no data
                    await asyncio.sleep(0.15)
                    assert len(master.ha.master.slaves) == 1 and slave.ha.slave.connected
                await fill(master, 10, "late")
                await caught_up(master, slave)
    run(scenario())
