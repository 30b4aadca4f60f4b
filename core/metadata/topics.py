"""Topic configurations (RocketMQ's TopicConfigManager), persisted in config/topics.json.

``attributes`` are a topic's per-topic settings by name, as RocketMQ 5's TopicConfig keeps
them (the Kafka front-end stores its dynamic topic configs there: ``cleanup.policy``,
``max.message.bytes`` ...); they are written with the topic and kept across restart.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..errors import InvalidTopicName, StoreUnavailable
from .json_file import ChangeLog, JsonFile

TOPIC_MAX_LENGTH = 127
# RocketMQ's character set plus '.', which Kafka topic names use widely ("logs.app1").
_VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_.-]+$")
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
PERM_RW = PERM_READ | PERM_WRITE

COMPACT_AT = 1 << 20  # a change log smaller than this is never folded in early

DEFAULT_TOPIC = "TBW102"  # the template topic clients ask a route for to auto-create


def validate_topic(topic: str) -> None:
    """RocketMQ's TopicValidator rules (character set, length), plus Kafka's '.'.

    RocketMQ 4.x clients refuse '.' themselves, so such topics serve Kafka, STOMP and
    native clients; "." and ".." are refused because a topic names a directory.
    """
    if not topic:
        raise InvalidTopicName(topic, "the topic name is empty")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise InvalidTopicName(topic, f"longer than {TOPIC_MAX_LENGTH} characters")
    if not _VALID_TOPIC.match(topic):
        raise InvalidTopicName(topic, "only letters, digits, '%', '|', '_', '-' and '.' are allowed")
    if topic in (".", ".."):
        raise InvalidTopicName(topic, "'.' and '..' are not topic names")


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_RW
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def queue_nums(self) -> int:
        return max(self.read_queue_nums, self.write_queue_nums)

    def to_json(self) -> dict:
        return {"topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm,
                "topicFilterType": self.topic_filter_type, "topicSysFlag": self.topic_sys_flag,
                "order": self.order, "attributes": dict(self.attributes)}

    @classmethod
    def from_json(cls, d: dict) -> "TopicConfig":
        return cls(d["topicName"], int(d.get("readQueueNums", 8)), int(d.get("writeQueueNums", 8)),
                   int(d.get("perm", PERM_RW)), d.get("topicFilterType", "SINGLE_TAG"),
                   int(d.get("topicSysFlag", 0)), bool(d.get("order", False)),
                   {str(k): str(v) for k, v in (d.get("attributes") or {}).items()})


class TopicConfigManager:
    """The topic table: topics.json (the whole table) plus topics.json.log, one JSON line
    per change since it was written. A change is appended and fsynced before ``put`` or
    ``remove`` returns (durable before it is answered) at a cost that does not grow with the
    table, where saving the whole table each time made creating N topics O(N^2) (12,000
    queues took 63 s). The log is folded into the table at load and whenever it outgrows
    it (amortised O(1) a change). Inside ``deferred()`` changes wait for its end and share
    one append and fsync (a Kafka CreateTopics of many topics)."""

    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "topics.json"))
        self.log = ChangeLog(self.file.path + ".log")
        self.table: dict[str, TopicConfig] = {}
        self.data_version = 0
        self._deferring = 0
        self._pending: list[dict] = []
        # told of each durable batch of changes (the name server registration, replication)
        self.listeners: list[Callable[[list[dict]], None]] = []

    def load(self) -> None:
        data = self.file.load() or {}
        for name, d in data.get("topicConfigTable", {}).items():
            self.table[name] = TopicConfig.from_json(d)
        self.data_version = int(data.get("dataVersion", {}).get("counter", 0))
        changes = self.log.read()
        for change in changes:
            self._apply(change)
        if changes or self.log.size:  # also a torn line alone: appends must not follow it
            self.persist()

    def _apply(self, change: dict) -> None:
        if "put" in change:
            cfg = TopicConfig.from_json(change["put"])
            self.table[cfg.topic_name] = cfg
        else:
            self.table.pop(change["remove"], None)
        self.data_version = max(self.data_version, int(change.get("version", 0)))

    def persist(self) -> None:
        """Write the whole table, then empty the change log (its changes are in it)."""
        self.file.save({"topicConfigTable": {n: c.to_json() for n, c in self.table.items()},
                        "dataVersion": {"counter": self.data_version}})
        self.log.clear()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def put(self, config: TopicConfig) -> TopicConfig:
        validate_topic(config.topic_name)
        self.table[config.topic_name] = config
        self.data_version += 1
        self._record({"put": config.to_json(), "version": self.data_version})
        return config

    def apply_change(self, change: dict) -> None:
        """One change record this table's listeners were told (a slave replaying its
        master's log: core/ha/metadata_log.py)."""
        if "put" in change:
            self.put(TopicConfig.from_json(change["put"]))
        else:
            self.remove(str(change["remove"]))

    def remove(self, topic: str) -> TopicConfig | None:
        config = self.table.pop(topic, None)
        if config is not None:
            self.data_version += 1
            self._record({"remove": topic, "version": self.data_version})
        return config

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Changes made inside are written together at its end (before it returns: callers
        answer after it). Never hold it across an await: another task's change would be
        answered before it is durable."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
            if not self._deferring:
                self.flush()

    def _record(self, change: dict) -> None:
        self._pending.append(change)
        if not self._deferring:
            self.flush()

    def flush(self) -> None:
        """Append the pending changes with one fsync; fold the log into the table once it is
        larger than the table was when last written."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self.log.append(pending)
        except OSError as exc:  # ENOSPC, EMFILE...: kept for the next flush, the caller is
            self._pending[:0] = pending  # refused with a retriable error
            raise StoreUnavailable(f"cannot record a topic change: {exc.strerror}") from exc
        if self.log.size > max(COMPACT_AT, self.file.size()):
            self.persist()
        for listener in self.listeners:
            listener(pending)
