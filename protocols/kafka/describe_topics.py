"""DescribeTopicPartitions (KIP-966): topics, their ids and partitions, paged by a cursor.

Kafka's rules (DescribeTopicPartitionsRequestHandler): topics in name order from the cursor's
topic on (every topic when none is named, skipping unknown ones then); at most
``response_partition_limit`` partitions in an answer (capped at 2,000, Kafka's
max.request.partition.size.limit), the next cursor naming where the following request starts;
a named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for
a name no topic can have), one the account may not see TOPIC_AUTHORIZATION_FAILED with a
zero id. A cursor must name one of the requested topics and a partition >= 0, else
INVALID_REQUEST. Like every handler family it never touches a socket.
"""

from __future__ import annotations

from typing import Any, Final

from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import validate_topic

from .errors import ErrorCode
from .requests import BrokerNode, Handler, RequestContext, group_leader, may_use_topic, partitions, replica_ids
from .schema import ApiKey
from .topic_ids import ZERO_ID, TopicIds

MAX_PARTITIONS: Final = 2000  # Kafka's max.request.partition.size.limit


class DescribeTopicsHandlers:
    def __init__(self, broker: Broker, node: BrokerNode, topic_ids: TopicIds) -> None:
        self.broker = broker
        self.node = node
        self.topic_ids = topic_ids
        self.table: dict[int, Handler] = {ApiKey.DESCRIBE_TOPIC_PARTITIONS: self._describe}

    async def _describe(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        cursor = body["cursor"]
        start_topic = cursor["topic_name"] if cursor else ""
        every = not body["topics"]
        if every:
            names = sorted(n for n in self.broker.topic_names() if n >= start_topic and may_use_topic(ctx, n))
        else:
            names = sorted({t["name"] for t in body["topics"] if t["name"] >= start_topic})
            if cursor is not None and cursor["topic_name"] not in names:
                return _invalid(body)
        if cursor is not None and cursor["partition_index"] < 0:
            return _invalid(body)
        remaining = max(min(MAX_PARTITIONS, body["response_partition_limit"]), 1)
        topics: list[dict[str, Any]] = []
        denied: list[dict[str, Any]] = []
        next_cursor = None
        # as Metadata places them: the group's master leads, its members are the replicas
        leader = group_leader(self.broker, self.node)
        replicas, isr = replica_ids(self.broker, self.node)
        code = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
        epoch = self.broker.leader_epoch()
        for name in names:
            if not may_use_topic(ctx, name):
                denied.append(_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, ZERO_ID))
                continue
            if remaining == 0:  # the next answer starts with this topic
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            n = partitions(self.broker, name)
            if n is None:
                if not every:
                    topics.append(_topic(_missing(name), name, ZERO_ID))
                continue
            first = cursor["partition_index"] if cursor and name == start_topic else 0
            last = min(n, first + remaining)
            out = _topic(ErrorCode.NONE, name, self.topic_ids.id_of(name))
            out["partitions"] = [{"error_code": code, "partition_index": i, "leader_id": leader,
                                  "leader_epoch": epoch, "replica_nodes": replicas, "isr_nodes": isr,
                                  "eligible_leader_replicas": None, "last_known_elr": None,
                                  "offline_replicas": []} for i in range(first, last)]
            topics.append(out)
            remaining -= last - first
            if last < n:
                next_cursor = {"topic_name": name, "partition_index": last}
                break
        return {"throttle_time_ms": 0, "topics": topics + denied, "next_cursor": next_cursor}


def _topic(code: ErrorCode, name: str, topic_id: bytes) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": [],
            "topic_authorized_operations": -2147483648}


def _missing(name: str) -> ErrorCode:
    try:
        validate_topic(name)
    except BrokerError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _invalid(body: dict[str, Any]) -> dict[str, Any]:
    """A request Kafka refuses whole: INVALID_REQUEST on every topic it named."""
    return {"throttle_time_ms": 0, "next_cursor": None,
            "topics": [_topic(ErrorCode.INVALID_REQUEST, t["name"], ZERO_ID) for t in body["topics"]]}
