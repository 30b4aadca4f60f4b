"""The topic configs that drive compaction, read from a topic's attributes.

Kafka's names and defaults (protocols/kafka/topic_configs.py validates and shows them; the
values here are what the compactor acts on). RocketMQ 5 marks a compaction topic with the
attribute ``+cleanup.policy=COMPACTION``; both spellings are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

DELETE_RETENTION_MS: Final = 86_400_000
MIN_COMPACTION_LAG_MS: Final = 0
MAX_COMPACTION_LAG_MS: Final = 2**63 - 1
MIN_CLEANABLE_DIRTY_RATIO: Final = 0.5


def is_compacted(attributes: Mapping[str, str]) -> bool:
    """cleanup.policy names compact (Kafka: ``compact`` or ``compact,delete``; RocketMQ 5:
    ``COMPACTION``, also under its ``+cleanup.policy`` spelling)."""
    policy = attributes.get("cleanup.policy") or attributes.get("+cleanup.policy")
    return policy is not None and "compact" in policy.lower()


def _number(attributes: Mapping[str, str], name: str, kind: type, default: float) -> float:
    raw = attributes.get(name)
    if raw is None:
        return default
    try:
        return kind(raw)
    except ValueError:  # validated when set; a hand-edited file falls back to the default
        return default


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """What a compaction of one topic honours (Kafka's topic configs of the same names)."""

    delete_retention_ms: int = DELETE_RETENTION_MS  # a tombstone outlives its key's older values this long
    min_compaction_lag_ms: int = MIN_COMPACTION_LAG_MS  # a record younger than this is never compacted
    max_compaction_lag_ms: int = MAX_COMPACTION_LAG_MS  # one older than this is compacted whatever the ratio
    min_cleanable_dirty_ratio: float = MIN_CLEANABLE_DIRTY_RATIO  # dirty / (clean + dirty) to compact

    @classmethod
    def of(cls, attributes: Mapping[str, str]) -> "CompactionPolicy":
        return cls(int(_number(attributes, "delete.retention.ms", int, DELETE_RETENTION_MS)),
                   int(_number(attributes, "min.compaction.lag.ms", int, MIN_COMPACTION_LAG_MS)),
                   int(_number(attributes, "max.compaction.lag.ms", int, MAX_COMPACTION_LAG_MS)),
                   float(_number(attributes, "min.cleanable.dirty.ratio", float, MIN_CLEANABLE_DIRTY_RATIO)))
