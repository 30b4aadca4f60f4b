"""A live broker with the AMQP front-end on a free loopback port (and nothing else it does
not need), for the real-client tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.support.live_broker import LiveBroker, start_live_broker


def amqp_config(config: BrokerConfig, **changes) -> BrokerConfig:
    return dataclasses.replace(config, listen_port=0, namesrv=ProtocolConfig(False, 0),
                               kafka=ProtocolConfig(False, 0), amqp=ProtocolConfig(True, 0),
                               mapped_file_size_commit_log=8 << 20, **changes)


@pytest.fixture(params=["uvloop", "asyncio"])
def amqp_broker(request, small_config) -> Iterator[LiveBroker]:
    """On both loops: `rocketport broker` runs uvloop, whose transports differ in detail."""
    live = start_live_broker(amqp_config(small_config), request.param)
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def amqp_port(amqp_broker) -> int:
    return amqp_broker.endpoint("amqp")[1]
