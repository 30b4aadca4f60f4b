"""Fixtures for the remoting tests: a live broker (remoting listener + embedded name server).

Real clients run in subprocesses (the C++ client is a C library: a crash must not take
pytest down), so the broker runs on its own event loop in a background thread for the
duration of a test (tests/support/live_broker.py); helpers are in tests/support/remoting.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.support.remoting import ACL_FILE, free_port


@pytest.fixture
def remoting_config(small_config: BrokerConfig) -> BrokerConfig:
    # A real port, not 0: offset message ids embed the configured listen port.
    # Fast delay levels so retries and dead letters happen within a test's patience.
    return dataclasses.replace(small_config, listen_port=free_port(),
                               message_delay_level=" ".join(["1s"] * 18), mapped_file_size_commit_log=4 << 20,
                               namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(False, 0))


@pytest.fixture
def acl_config(remoting_config: BrokerConfig, tmp_path) -> BrokerConfig:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    return dataclasses.replace(remoting_config, acl_enable=True, plain_acl_file=str(path))


@pytest.fixture
def live_broker(remoting_config: BrokerConfig) -> Iterator[LiveBroker]:
    live = start_live_broker(remoting_config)
    try:
        yield live
    finally:
        live.stop()
