"""Kafka's topic configs: the names this broker knows, how each value is checked, its
default and its broker-level synonym (for DescribeConfigs).

A topic's dynamic configs are stored in the core's topic table (``TopicConfig.attributes``,
kept across restart); this module only knows Kafka's vocabulary. What each config does here
(enforced, or stored and shown only) is listed in docs/protocol-kafka.md. Never touches
sockets or the store.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rocketport.core.config import BrokerConfig

_LONG_MAX: Final = str(2**63 - 1)


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' config_source (KIP-226)."""

    DYNAMIC_TOPIC_CONFIG = 1
    DEFAULT_CONFIG = 5


class ConfigType(enum.IntEnum):
    """DescribeConfigs' config_type (KIP-569)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class InvalidConfig(ValueError):
    """A config name or value Kafka would refuse with INVALID_CONFIG (the message says why)."""


Check = Callable[[str], None]


def _number(kind: type, low: float | None = None, high: float | None = None) -> Check:
    def check(value: str) -> None:
        try:
            n = kind(value)
        except ValueError:
            raise InvalidConfig(f"{value!r} is not a valid {kind.__name__}") from None
        if low is not None and n < low or high is not None and n > high:
            raise InvalidConfig(f"{value} is out of range [{low}, {high}]")
    return check


def _one_of(*allowed: str) -> Check:
    def check(value: str) -> None:
        if value not in allowed:
            raise InvalidConfig(f"{value!r} is not one of {', '.join(allowed)}")
    return check


def _list_of(*allowed: str) -> Check:
    def check(value: str) -> None:
        items = [v.strip() for v in value.split(",")]
        if not value.strip() or any(item not in allowed for item in items):
            raise InvalidConfig(f"{value!r} is not a list of {', '.join(allowed)}")
    return check


def _boolean(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise InvalidConfig(f"{value!r} is not true or false")


def _any(value: str) -> None:
    return None


def _timestamp_type(value: str) -> None:
    _one_of("CreateTime", "LogAppendTime")(value)
    if value == "LogAppendTime":
        raise InvalidConfig("LogAppendTime is not supported: batches are stored as produced")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    check: Check
    type: ConfigType
    default: str | Callable[[BrokerConfig], str]
    synonym: str | None  # the broker config whose value is the default

    def default_value(self, config: BrokerConfig) -> str:
        return self.default if isinstance(self.default, str) else self.default(config)


_L, _I, _B = ConfigType.LONG, ConfigType.INT, ConfigType.BOOLEAN
TOPIC_CONFIGS: Final[dict[str, TopicConfigDef]] = {
    "cleanup.policy": TopicConfigDef(_list_of("delete", "compact"), ConfigType.LIST, "delete",
                                     "log.cleanup.policy"),
    "compression.type": TopicConfigDef(
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), ConfigType.STRING,
        "producer", "compression.type"),
    "delete.retention.ms": TopicConfigDef(_number(int, 0), _L, "86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": TopicConfigDef(_number(int, 0), _L, "60000", "log.segment.delete.delay.ms"),
    "flush.messages": TopicConfigDef(_number(int, 1), _L, _LONG_MAX, "log.flush.interval.messages"),
    "flush.ms": TopicConfigDef(_number(int, 0), _L, _LONG_MAX, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": TopicConfigDef(_any, ConfigType.LIST, "", None),
    "index.interval.bytes": TopicConfigDef(_number(int, 0), _I, "4096", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": TopicConfigDef(_any, ConfigType.LIST, "", None),
    "local.retention.bytes": TopicConfigDef(_number(int, -2), _L, "-2", "log.local.retention.bytes"),
    "local.retention.ms": TopicConfigDef(_number(int, -2), _L, "-2", "log.local.retention.ms"),
    "max.compaction.lag.ms": TopicConfigDef(_number(int, 1), _L, _LONG_MAX, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": TopicConfigDef(_number(int, 0, 2**31 - 1), _I,
                                        lambda c: str(c.max_message_size), "message.max.bytes"),
    "message.downconversion.enable": TopicConfigDef(_boolean, _B, "true", "log.message.downconversion.enable"),
    "message.format.version": TopicConfigDef(_any, ConfigType.STRING, "3.0-IV1", "log.message.format.version"),
    "message.timestamp.after.max.ms": TopicConfigDef(_number(int, 0), _L, _LONG_MAX,
                                                     "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": TopicConfigDef(_number(int, 0), _L, _LONG_MAX,
                                                      "log.message.timestamp.before.max.ms"),
    "message.timestamp.difference.max.ms": TopicConfigDef(_number(int, 0), _L, _LONG_MAX,
                                                          "log.message.timestamp.difference.max.ms"),
    "message.timestamp.type": TopicConfigDef(_timestamp_type, ConfigType.STRING, "CreateTime",
                                             "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": TopicConfigDef(_number(float, 0, 1), ConfigType.DOUBLE, "0.5",
                                                "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": TopicConfigDef(_number(int, 0), _L, "0", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": TopicConfigDef(_number(int, 1, 1), _I, "1", "min.insync.replicas"),
    "preallocate": TopicConfigDef(_boolean, _B, "false", "log.preallocate"),
    "remote.storage.enable": TopicConfigDef(_one_of("false"), _B, "false", None),
    "retention.bytes": TopicConfigDef(_number(int), _L, "-1", "log.retention.bytes"),
    "retention.ms": TopicConfigDef(_number(int, -1), _L, lambda c: str(c.file_reserved_time * 3_600_000),
                                   "log.retention.ms"),
    "segment.bytes": TopicConfigDef(_number(int, 14), _I, lambda c: str(c.mapped_file_size_commit_log),
                                    "log.segment.bytes"),
    "segment.index.bytes": TopicConfigDef(_number(int, 4), _I, "10485760", "log.index.size.max.bytes"),
    "segment.jitter.ms": TopicConfigDef(_number(int, 0), _L, "0", "log.roll.jitter.ms"),
    "segment.ms": TopicConfigDef(_number(int, 1), _L, "604800000", "log.roll.ms"),
    "unclean.leader.election.enable": TopicConfigDef(_boolean, _B, "false", "unclean.leader.election.enable"),
}


def validate(name: str, value: str | None) -> None:
    """InvalidConfig unless ``name`` is a topic config and ``value`` one of its values."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfig(f"unknown topic config {name!r}")
    if value is None:
        raise InvalidConfig(f"{name}: a null value")
    try:
        definition.check(value)
    except InvalidConfig as exc:
        raise InvalidConfig(f"{name}: {exc}") from None


def is_compacted(attributes: dict[str, str]) -> bool:
    """cleanup.policy includes compact: every record needs a key."""
    policy = attributes.get("cleanup.policy")
    return policy is not None and "compact" in policy


def described(name: str, attributes: dict[str, str], config: BrokerConfig,
              synonyms: bool) -> dict:
    """One DescribeConfigs entry for a topic: its dynamic value, else the default."""
    definition = TOPIC_CONFIGS[name]
    default = definition.default_value(config)
    value = attributes.get(name)
    source = ConfigSource.DEFAULT_CONFIG if value is None else ConfigSource.DYNAMIC_TOPIC_CONFIG
    found = []
    if synonyms:
        if value is not None:
            found.append({"name": name, "value": value, "source": ConfigSource.DYNAMIC_TOPIC_CONFIG})
        if definition.synonym is not None:
            found.append({"name": definition.synonym, "value": default, "source": ConfigSource.DEFAULT_CONFIG})
    return {"name": name, "value": default if value is None else value, "read_only": False,
            "is_default": value is None, "config_source": source, "is_sensitive": False,
            "synonyms": found, "config_type": definition.type, "documentation": None}
