"""Topic configurations (RocketMQ's TopicConfigManager), persisted in config/topics.json.

``attributes`` are a topic's per-topic settings by name, as RocketMQ 5's TopicConfig keeps
them (the Kafka front-end stores its dynamic topic configs there: ``cleanup.policy``,
``max.message.bytes`` ...); they are written with the topic and kept across restart.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import InvalidTopicName
from .json_file import JsonFile

TOPIC_MAX_LENGTH = 127
# RocketMQ's character set plus '.', which Kafka topic names use widely ("logs.app1").
_VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_.-]+$")
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
PERM_RW = PERM_READ | PERM_WRITE

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
    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "topics.json"))
        self.table: dict[str, TopicConfig] = {}
        self.data_version = 0

    def load(self) -> None:
        data = self.file.load() or {}
        for name, d in data.get("topicConfigTable", {}).items():
            self.table[name] = TopicConfig.from_json(d)
        self.data_version = int(data.get("dataVersion", {}).get("counter", 0))

    def persist(self) -> None:
        self.file.save({"topicConfigTable": {n: c.to_json() for n, c in self.table.items()},
                        "dataVersion": {"counter": self.data_version}})

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def put(self, config: TopicConfig) -> TopicConfig:
        validate_topic(config.topic_name)
        self.table[config.topic_name] = config
        self.data_version += 1
        self.persist()
        return config

    def remove(self, topic: str) -> TopicConfig | None:
        config = self.table.pop(topic, None)
        if config is not None:
            self.data_version += 1
            self.persist()
        return config
