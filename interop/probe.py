"""The runner's own view of the broker, through the native client (rocketport.client.sync):
create topics and groups before a scenario, and find what no protocol client can read
(`%DLQ%group`). Only used on the broker without ACL."""

from __future__ import annotations

import time

from rocketport.client.sync import AdminClient, MessageExt


class Probe:
    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.namesrv)
        return self._admin

    def create_topic(self, topic: str, queues: int = 4) -> None:
        self.admin.create_topic(topic, queue_nums=queues)

    def create_group(self, group: str, retry_max_times: int) -> None:
        self.admin.create_group(group, retry_max_times=retry_max_times)

    def wait_key(self, topic: str, key: str, timeout: float) -> list[MessageExt]:
        """The messages of `topic` with `key` (by the broker's key index: `%DLQ%` topics are
        write-only, as in RocketMQ, so they are found this way, not read)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                found = self.admin.query_by_key(topic, key)
            except Exception:  # the topic does not exist yet
                found = []
            if found:
                return found
            time.sleep(1)
        return []

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
