"""Subscription group configurations (RocketMQ's SubscriptionGroupManager), persisted in
config/subscriptionGroup.json."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

from .json_file import JsonFile

_JSON_NAMES = {
    "group_name": "groupName", "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable", "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes", "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
}


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict:
        return {j: getattr(self, a) for a, j in _JSON_NAMES.items()}

    @classmethod
    def from_json(cls, d: dict) -> "SubscriptionGroupConfig":
        defaults = cls(d["groupName"])
        values = {a: type(getattr(defaults, a))(d[j]) for a, j in _JSON_NAMES.items() if j in d}
        return dataclasses.replace(defaults, **values)


class SubscriptionGroupManager:
    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "subscriptionGroup.json"))
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = 0
        # told of each saved change, as the topic table's listeners (replication)
        self.listeners: list[Callable[[list[dict]], None]] = []

    def load(self) -> None:
        data = self.file.load() or {}
        for name, d in data.get("subscriptionGroupTable", {}).items():
            self.table[name] = SubscriptionGroupConfig.from_json(d)
        self.data_version = int(data.get("dataVersion", {}).get("counter", 0))

    def persist(self) -> None:
        self.file.save({"subscriptionGroupTable": {n: c.to_json() for n, c in self.table.items()},
                        "dataVersion": {"counter": self.data_version}})

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def put(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        self.table[config.group_name] = config
        self.data_version += 1
        self.persist()
        self._told({"put": config.to_json()})
        return config

    def apply_change(self, change: dict) -> None:
        """One change record this table's listeners were told (a slave replaying its
        master's log: core/ha/metadata_log.py)."""
        if "put" in change:
            self.put(SubscriptionGroupConfig.from_json(change["put"]))
        else:
            self.remove(str(change["remove"]))

    def remove(self, group: str) -> SubscriptionGroupConfig | None:
        config = self.table.pop(group, None)
        if config is not None:
            self.data_version += 1
            self.persist()
            self._told({"remove": group})
        return config

    def _told(self, change: dict) -> None:
        for listener in self.listeners:
            listener([change])
