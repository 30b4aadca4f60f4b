"""Fixtures for the Kafka client tests: a live broker on 127.0.0.1, ephemeral ports.

The server runs in a background thread with its own event loop (tests/support/live_broker.py),
so the (blocking) Kafka client libraries drive it from the test thread exactly as they would
a remote broker; the config is tests/support/kafka.py's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.kafka import start_broker
from tests.support.live_broker import LiveBroker


@pytest.fixture
def live_broker(tmp_path) -> Iterator[LiveBroker]:
    live = start_broker(str(tmp_path / "store"))
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture(params=["uvloop", "asyncio"])
def any_loop_broker(request, tmp_path) -> Iterator[LiveBroker]:
    """The session's transport handling differs between loops: session tests run on both."""
    live = start_broker(str(tmp_path / "store"), request.param)
    try:
        yield live
    finally:
        live.stop()
