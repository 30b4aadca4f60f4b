"""A live broker with the STOMP front-end (TCP and WebSocket) on free loopback ports."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.support.live_broker import LiveBroker, start_live_broker


@pytest.fixture
def stomp_config(small_config: BrokerConfig) -> BrokerConfig:
    # fast delay levels so NACK -> retry -> DLQ happens within a test's patience
    return dataclasses.replace(small_config, listen_port=0, namesrv=ProtocolConfig(True, 0),
                               kafka=ProtocolConfig(False, 0), stomp=ProtocolConfig(True, 0),
                               message_delay_level=" ".join(["1s"] * 18),
                               mapped_file_size_commit_log=4 << 20, default_topic_queue_nums=2)


@pytest.fixture
def stomp_broker(stomp_config: BrokerConfig) -> Iterator[LiveBroker]:
    live = start_live_broker(stomp_config)
    try:
        yield live
    finally:
        live.stop()
