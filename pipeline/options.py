"""The `rocketport` data source's options, parsed once on the driver into plain records.

Option names are the contract of issue 21 (`namesrv`, `topic`, `tags`, `sql`,
`startingOffsets`, `endingOffsets`, `maxOffsetsPerTrigger`, `group`) plus
`maxOffsetsPerPartition` (how large a queue range one Spark partition reads). Offsets
specs are `earliest`, `latest`, a timestamp (epoch milliseconds, or ISO 8601) or per-queue
JSON ``{"topic": {"queueId" | "broker:queueId": offset}}`` where -2 means earliest and -1
latest. Nothing here does I/O: specs are resolved against the broker in `plan.py`.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1
DEFAULT_GROUP = "rocketport-spark"
DEFAULT_MAX_OFFSETS_PER_PARTITION = 200_000


class OptionError(ValueError):
    """A bad option value; the message names the option."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end each queue: `kind` is earliest, latest, timestamp or queues."""

    kind: str
    timestamp_ms: int = 0
    # topic -> key ("3" for queue 3 of any broker, "broker-a:3" for one) -> offset
    queues: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def for_queue(self, topic: str, broker: str, queue_id: int) -> int | None:
        """The offset a per-queue spec gives this queue (EARLIEST/LATEST included); None
        when the spec does not name it."""
        table = self.queues.get(topic, {})
        value = table.get(f"{broker}:{queue_id}")
        return table.get(str(queue_id)) if value is None else value


def parse_offsets(name: str, text: str | None, default: str) -> OffsetSpec:
    text = (text or default).strip()
    low = text.lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low)
    if text.lstrip("-").isdigit():
        return OffsetSpec("timestamp", int(text))
    if text.startswith("{"):
        try:
            raw = json.loads(text)
            queues = {str(t): {str(q): int(o) for q, o in per.items()} for t, per in raw.items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise OptionError(f"{name}: per-queue offsets must be "
                              f'{{"topic": {{"queueId": offset}}}}: {exc}') from None
        return OffsetSpec("queues", queues=queues)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise OptionError(f"{name}: {text!r} is not earliest, latest, a timestamp or JSON") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return OffsetSpec("timestamp", int(when.timestamp() * 1000))


def _int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{name} must be an integer, not {text!r}") from None
    if value <= 0:
        raise OptionError(f"{name} must be positive")
    return value


@dataclass(frozen=True, slots=True)
class ReadOptions:
    namesrv: str
    topics: tuple[str, ...]
    tags: str | None
    sql: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    group: str
    max_offsets_per_trigger: int | None
    max_offsets_per_partition: int

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
        namesrv = options.get("namesrv")
        if not namesrv:
            raise OptionError("namesrv (host:port of the name server) is required")
        topics = tuple(t.strip() for t in (options.get("topic") or "").split(",") if t.strip())
        if not topics:
            raise OptionError("topic (one, or comma-separated) is required")
        tags = options.get("tags")
        tags = tags.strip() if tags and tags.strip() not in ("", "*") else None
        sql = options.get("sql") or None
        if streaming and options.get("endingOffsets"):
            raise OptionError("endingOffsets is for batch reads only")
        return cls(namesrv, topics, tags, sql,
                   parse_offsets("startingOffsets", options.get("startingOffsets"),
                                 "latest" if streaming else "earliest"),
                   parse_offsets("endingOffsets", options.get("endingOffsets"), "latest"),
                   options.get("group") or DEFAULT_GROUP,
                   _int(options, "maxOffsetsPerTrigger", None),
                   _int(options, "maxOffsetsPerPartition", DEFAULT_MAX_OFFSETS_PER_PARTITION))


@dataclass(frozen=True, slots=True)
class WriteOptions:
    namesrv: str
    topic: str
    group: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        namesrv, topic = options.get("namesrv"), (options.get("topic") or "").strip()
        if not namesrv:
            raise OptionError("namesrv (host:port of the name server) is required")
        if not topic or "," in topic:
            raise OptionError("topic (exactly one) is required for writes")
        return cls(namesrv, topic, options.get("group") or DEFAULT_GROUP)
