"""KIP-848's group APIs: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

They speak topic ids (``topic_ids.py``); the coordinator (``consumer_groups.py``) works on
topic names, so this family maps between the two and between the coordinator's refusals
and Kafka's error fields. Like every handler family it never touches a socket; bad input
is an error code in the answer.
"""

from __future__ import annotations

from typing import Any

from rocketport.core.broker import Broker

from .assignors import Assignment
from .consumer_groups import ConsumerGroupCoordinator, GroupFailure, HeartbeatRequest
from .errors import ErrorCode
from .requests import Handler, RequestContext, coordinates, fits, may_use_group, may_use_topic
from .schema import ApiKey
from .topic_ids import TopicIds


class ConsumerGroupHandlers:
    def __init__(self, broker: Broker, coordinator: ConsumerGroupCoordinator, topic_ids: TopicIds) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.topic_ids = topic_ids
        self.table: dict[int, Handler] = {
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self._heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self._describe,
        }

    async def _heartbeat(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                                 "member_id": body["member_id"], "member_epoch": body["member_epoch"],
                                 "heartbeat_interval_ms": 0, "assignment": None}
        try:
            if not may_use_group(ctx, body["group_id"]):
                raise GroupFailure(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            if not coordinates(self.broker):
                raise GroupFailure(ErrorCode.NOT_COORDINATOR)
            # what the group keeps is echoed by ConsumerGroupDescribe and ListGroups (at old versions too)
            if not all(map(fits, (body["group_id"], body["member_id"], body["instance_id"], body["rack_id"],
                                  body["subscribed_topic_regex"], body["server_assignor"],
                                  *(body["subscribed_topic_names"] or ())))):
                raise GroupFailure(ErrorCode.INVALID_REQUEST, "a string is longer than 32767 bytes")
            names = body["subscribed_topic_names"]
            if names is not None and not all(may_use_topic(ctx, n) for n in names):
                raise GroupFailure(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            owned: Assignment | None = None
            if body["topic_partitions"] is not None:
                owned = {}
                for tp in body["topic_partitions"]:
                    name = self.topic_ids.name_of(tp["topic_id"])
                    if name is not None:  # a deleted topic's partitions are gone anyway
                        owned.setdefault(name, set()).update(tp["partitions"])
            result = self.coordinator.heartbeat(HeartbeatRequest(
                body["group_id"], body["member_id"], body["member_epoch"], body["instance_id"], body["rack_id"],
                body["rebalance_timeout_ms"], names, body["subscribed_topic_regex"], body["server_assignor"],
                owned, ctx.client_id or "", ctx.client_host[0], ctx.api_version))
        except GroupFailure as exc:
            reply.update(error_code=exc.code, error_message=exc.message)
            return reply
        reply.update(member_id=result.member_id, member_epoch=result.member_epoch,
                     heartbeat_interval_ms=result.heartbeat_interval_ms)
        if result.assignment is not None:
            reply["assignment"] = {"topic_partitions": self._by_id(result.assignment, names=False)}
        return reply

    def _by_id(self, assignment: Assignment, *, names: bool) -> list[dict[str, Any]]:
        out = []
        for topic, parts in sorted(assignment.items()):
            entry: dict[str, Any] = {"topic_id": self.topic_ids.id_of(topic), "partitions": sorted(parts)}
            if names:
                entry["topic_name"] = topic
            out.append(entry)
        return out

    async def _describe(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        groups = []
        for group_id in dict.fromkeys(body["group_ids"]):
            out: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                                   "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                                   "assignor_name": "", "members": []}
            groups.append(out)
            if not may_use_group(ctx, group_id):
                out["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            if not coordinates(self.broker):
                out["error_code"] = ErrorCode.NOT_COORDINATOR
                continue
            group = self.coordinator.groups.get(group_id)
            if group is None:  # unknown, or a classic group (the client then asks DescribeGroups)
                out.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                           error_message=f"Group {group_id} not found or not a consumer group.")
                continue
            out.update(group_state=group.state, group_epoch=group.epoch, assignment_epoch=group.assignment_epoch,
                       assignor_name=group.assignor)
            out["members"] = [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.epoch, "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": {"topic_partitions": self._by_id(m.assigned, names=True)},
                "target_assignment": {"topic_partitions": self._by_id(group.target.get(m.member_id, {}), names=True)},
            } for m in group.members.values()]
        return {"throttle_time_ms": 0, "groups": groups}
