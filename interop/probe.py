"""The runner's own view of the broker, through the native client (rocketport.client.sync):
create topics and groups before a scenario, and find what no protocol client can read
(`%DLQ%group`). Only used on the broker without ACL."""

from __future__ import annotations

import time

from rocketport.client.sync import AdminClient, MessageExt, MessageQueue


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

    def wait_dlq(self, group: str, key: str | None, timeout: float) -> list[MessageExt] | None:
        """None until `%DLQ%group` holds a message; then the messages with `key` found by the
        broker's key index ([] without a key). `%DLQ%` topics are write-only, as in RocketMQ,
        so they are looked at this way, not read."""
        topic = f"%DLQ%{group}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                route = self.admin.topic_route(topic)
                stored = sum(self.admin.max_offset(MessageQueue(topic, q.broker_name, i))
                             for q in route.queue_datas for i in range(q.write_queue_nums))
            except Exception:  # the topic does not exist yet
                stored = 0
            if stored:
                return self.admin.query_by_key(topic, key) if key else []
            time.sleep(1)
        return None

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
