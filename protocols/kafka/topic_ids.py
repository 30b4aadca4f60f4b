"""Kafka topic ids for this broker's topics: a stable UUID per topic name.

Kafka gives each topic a random id when it is created, so that clients can tell a deleted
and recreated topic from the old one. This broker's topics live in the core's topic table,
which has no id; the id is instead derived from the name (a SHA-256 of the cluster name and
the topic name, shaped as a version-8 UUID), so it is the same after a restart and on every
broker of a cluster without being stored. The price: a topic deleted and recreated under
the same name keeps its id. KIP-848 assignments, Metadata v10+, Fetch v13+ and Produce v13+
carry these ids; nothing here touches the store.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from rocketport.core.broker import Broker

from .errors import ErrorCode

ZERO_ID: Final = bytes(16)


def topic_id(cluster: str, name: str) -> bytes:
    """The 16 raw bytes of ``name``'s id: never Kafka's reserved zero or metadata-topic id."""
    raw = bytearray(hashlib.sha256(f"{cluster}\0{name}".encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80  # version 8 (custom), RFC 9562
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC variant
    return bytes(raw)


class TopicIds:
    """Name to id and back for one broker's topics (ids cached; names looked up on a miss)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.cluster = broker.config.broker_cluster_name
        self._ids: dict[str, bytes] = {}
        self._names: dict[bytes, str] = {}

    def id_of(self, name: str) -> bytes:
        raw = self._ids.get(name)
        if raw is None:
            raw = topic_id(self.cluster, name)
            if len(self._ids) > 100_000:  # bounded: topics come and go
                self._ids.clear()
                self._names.clear()
            self._ids[name] = raw
            self._names[raw] = name
        return raw

    def name_of(self, raw: bytes) -> str | None:
        """The existing topic with this id, None if there is none."""
        name = self._names.get(raw)
        if name is not None and self.broker.get_topic(name) is not None:
            return name
        for name in self.broker.topic_names():
            if self.id_of(name) == raw:
                return name
        return None

    # ------------------------------------------------------------------ Fetch v13+
    def fetch_by_name(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A Fetch v13+ (topics by id) as the fetch handler reads it (by name), and the
        answers for ids no topic has (UNKNOWN_TOPIC_ID per partition, as Kafka answers)."""
        topics, unknown = [], []
        for t in body["topics"]:
            name = self.name_of(t["topic_id"])
            if name is not None:
                topics.append({**t, "topic": name})
                continue
            unknown.append({"topic_id": t["topic_id"], "partitions": [
                {"partition_index": p["partition"], "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None, "records": None}
                for p in t["partitions"]]})
        forgotten = []
        for f in body["forgotten_topics_data"]:
            name = self.name_of(f["topic_id"])
            if name is not None:
                forgotten.append({**f, "topic": name})
        return {**body, "topics": topics, "forgotten_topics_data": forgotten}, unknown

    def fetch_by_id(self, response: dict[str, Any], unknown: list[dict[str, Any]]) -> dict[str, Any]:
        """The fetch handler's answer (by name) as Fetch v13+ sends it (by id)."""
        for t in response["responses"]:
            t["topic_id"] = self.id_of(t["topic"])
        if unknown:
            response["responses"] = [*response["responses"], *unknown]
        return response

    # ------------------------------------------------------------------ Produce v13+
    def produce_by_name(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A Produce v13+ (topics by id) as the produce handler reads it (by name), and the
        answers for ids no topic has (UNKNOWN_TOPIC_ID per partition, nothing written)."""
        topics, unknown = [], []
        for t in body["topic_data"]:
            name = self.name_of(t["topic_id"])
            if name is not None:
                topics.append({**t, "name": name})
                continue
            unknown.append({"topic_id": t["topic_id"], "partition_responses": [
                {"index": p["index"], "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "base_offset": -1,
                 "log_start_offset": -1, "record_errors": [], "error_message": None}
                for p in t["partition_data"]]})
        return {**body, "topic_data": topics}, unknown

    def produce_by_id(self, response: dict[str, Any], unknown: list[dict[str, Any]]) -> dict[str, Any]:
        """The produce handler's answer (by name) as Produce v13+ sends it (by id)."""
        for t in response["responses"]:
            t["topic_id"] = self.id_of(t["name"])
        if unknown:
            response["responses"] = [*response["responses"], *unknown]
        return response
