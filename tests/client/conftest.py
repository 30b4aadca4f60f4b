"""Fixtures for the native client's tests: a live broker (remoting + embedded name server)
on free loopback ports, in a background thread, as tests/protocols/remoting uses."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.support.remoting import free_port


@pytest.fixture
def client_config(small_config: BrokerConfig) -> BrokerConfig:
    # A real port, not 0: offset message ids embed the configured listen port. Delay
    # levels of one second so retries and dead letters happen within a test's patience.
    return dataclasses.replace(small_config, listen_port=free_port(),
                               message_delay_level=" ".join(["1s"] * 18),
                               mapped_file_size_commit_log=4 << 20,
                               namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(False, 0))


@pytest.fixture
def broker(client_config: BrokerConfig) -> Iterator[LiveBroker]:
    live = start_live_broker(client_config)
    try:
        yield live
    finally:
        live.stop()
