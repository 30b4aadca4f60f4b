"""A full disk through AMQP: publishes the store refuses are nacked (publisher confirms),
the connection is told it is blocked and then unblocked, and publishing resumes once space
returns, without a restart; the broker keeps serving the queue meanwhile."""

from __future__ import annotations

import dataclasses

import pika
import pytest
from pika.exceptions import NackError

from rocketport.core.config import ProtocolConfig
from tests.protocols.amqp.test_pika import _drain
from tests.support.disk import SimulatedFullDisk
from tests.support.live_broker import start_live_broker

CQ_ENTRIES = 64  # small_config's ConsumeQueue segment


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_a_full_disk_nacks_blocks_and_resumes(small_config, monkeypatch, flush):
    disk = SimulatedFullDisk(monkeypatch)
    config = dataclasses.replace(small_config, flush_disk_type=flush, listen_port=0,
                                 namesrv=ProtocolConfig(False, 0), kafka=ProtocolConfig(False, 0),
                                 amqp=ProtocolConfig(True, 0))
    live = start_live_broker(config)
    try:
        events: list[str] = []
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1]))
        conn.add_on_connection_blocked_callback(lambda c, frame: events.append("blocked"))
        conn.add_on_connection_unblocked_callback(lambda c, frame: events.append("unblocked"))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("full-q")
        ch.basic_publish("", "full-q", b"first")  # the queue's first ConsumeQueue segment exists
        disk.full = True
        stored = refused = 0
        for i in range(CQ_ENTRIES + 5):
            try:
                ch.basic_publish("", "full-q", b"m%03d" % i)
                stored += 1
            except NackError:
                refused += 1
        assert (stored, refused) == (CQ_ENTRIES - 1, 6)
        conn.process_data_events(time_limit=0.2)
        assert events == ["blocked"]
        disk.full = False
        ch.basic_publish("", "full-q", b"after")
        conn.process_data_events(time_limit=0.2)
        assert events == ["blocked", "unblocked"]
        got = _drain(ch, "full-q", CQ_ENTRIES + 1)
        assert [b for _, _, b in got] == [b"first"] + [b"m%03d" % i for i in range(CQ_ENTRIES - 1)] + [b"after"]
        conn.close()
    finally:
        live.stop()
