"""Kafka test support: a broker config on ephemeral loopback ports, and a live broker on it."""

from __future__ import annotations

from typing import Any

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.support.live_broker import LiveBroker, start_live_broker


def kafka_config(store_dir: str, **overrides: Any) -> BrokerConfig:
    """Kafka on 127.0.0.1, ephemeral port; ``overrides`` are BrokerConfig fields."""
    return BrokerConfig(
        store_path_root_dir=store_dir,
        mapped_file_size_commit_log=64 << 20,
        default_topic_queue_nums=4,
        kafka=ProtocolConfig(True, 0, "127.0.0.1"),
        # ephemeral remoting and name-server ports too: a broker already running on the
        # defaults (10911, 9876) must not fail these tests
        **{"listen_port": 0, "namesrv": ProtocolConfig(True, 0, "127.0.0.1"),
           "stomp": ProtocolConfig(False, 0), "amqp": ProtocolConfig(False, 0), **overrides},
    )


def start_broker(store_dir: str, loop_kind: str = "uvloop", **overrides: Any) -> LiveBroker:
    """A live broker on :func:`kafka_config` (stop it with ``live.stop()``)."""
    return start_live_broker(kafka_config(store_dir, **overrides), loop_kind)
