"""Kafka's consumer-group APIs: classic membership (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, through the group coordinator), ListGroups (classic and KIP-848
groups) and committed offsets (OffsetCommit, OffsetFetch), which live in the core's offset
store shared by every protocol; a KIP-848 group's commits are checked against its member
epochs by the consumer-group coordinator.

Like every handler family it turns a decoded request into a response dict, calls only the
Broker facade and the coordinator and never touches a socket; bad input is an error code.
"""

from __future__ import annotations

from typing import Any, Final

from rocketport.core.auth.plain_acl import SUB
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import validate_topic

from .consumer_groups import ConsumerGroupCoordinator
from .coordinator import GroupCoordinator, GroupError, GroupState
from .errors import ErrorCode
from .requests import (
    MAX_STRING,
    OFFSET_METADATA_MAX_BYTES,
    Handler,
    RequestContext,
    coordinates,
    fits,
    has_partition,
    may_use_group,
    may_use_topic,
)
from .schema import ApiKey

_ID_SUFFIX: Final = 37  # "-" and a UUID: the coordinator makes member ids of a client or instance id


def _is_topic_name(name: str) -> bool:
    try:
        validate_topic(name)
    except BrokerError:
        return False
    return True


class GroupHandlers:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, OffsetCommit,
    OffsetFetch."""

    def __init__(self, broker: Broker, coordinator: GroupCoordinator,
                 consumer_groups: ConsumerGroupCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.consumer_groups = consumer_groups  # KIP-848 groups: their commits are checked there
        self.table: dict[int, Handler] = {
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._sync_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
        }

    async def _join_group(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        try:
            # What a group keeps is echoed to its members and to DescribeGroups and ListGroups
            # at any version: a string only flexible versions can carry (a 40 KB group id)
            # would make those responses unencodable for everyone else.
            if not fits(body["group_id"]):
                raise GroupError(ErrorCode.INVALID_GROUP_ID, body["member_id"])
            if not (all(map(fits, (body["member_id"], body["protocol_type"], *(p["name"] for p in body["protocols"]))))
                    and fits(body["group_instance_id"], MAX_STRING - _ID_SUFFIX)
                    and fits(ctx.client_id, MAX_STRING - _ID_SUFFIX)):
                raise GroupError(ErrorCode.INVALID_REQUEST, body["member_id"])
            if not may_use_group(ctx, body["group_id"]):
                raise GroupError(ErrorCode.GROUP_AUTHORIZATION_FAILED, body["member_id"])
            if not coordinates(self.broker):
                raise GroupError(ErrorCode.NOT_COORDINATOR, body["member_id"])
            args = (body["group_id"], body["member_id"], body["group_instance_id"], ctx.client_id or "",
                    ctx.client_host[0], body["session_timeout_ms"], body["rebalance_timeout_ms"],
                    body["protocol_type"], [(p["name"], p["metadata"]) for p in body["protocols"]])
            if self.consumer_groups.has_members(body["group_id"]):
                # a KIP-848 group: it serves its classic members itself (online migration)
                result = self.consumer_groups.classic_join(*args, require_known_member_id=ctx.api_version >= 4)
            else:
                self.consumer_groups.forget(body["group_id"])  # an empty consumer group turns classic
                result = await self.coordinator.join(*args, require_known_member_id=ctx.api_version >= 4)
        except GroupError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "generation_id": -1,
                    "protocol_type": None, "protocol_name": None if ctx.api_version >= 7 else "",
                    "leader": "", "member_id": exc.member_id, "members": []}
        return {"throttle_time_ms": 0, "error_code": result.error_code, "generation_id": result.generation_id,
                "protocol_type": result.protocol_type, "protocol_name": result.protocol_name or "",
                "leader": result.leader, "member_id": result.member_id, "members": result.members}

    async def _sync_group(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        assignments = {a["member_id"]: a["assignment"] for a in body["assignments"]}
        try:
            if not may_use_group(ctx, body["group_id"]):
                raise GroupError(ErrorCode.GROUP_AUTHORIZATION_FAILED, body["member_id"])
            if not coordinates(self.broker):
                raise GroupError(ErrorCode.NOT_COORDINATOR, body["member_id"])
            ptype: str | None
            pname: str | None
            if self.consumer_groups.has_members(body["group_id"]):
                ptype, pname, assignment = self.consumer_groups.classic_sync(
                    body["group_id"], body["generation_id"], body["member_id"], body["group_instance_id"],
                    body["protocol_type"], body["protocol_name"])
            else:
                ptype, pname, assignment = await self.coordinator.sync(
                    body["group_id"], body["generation_id"], body["member_id"], body["group_instance_id"],
                    assignments)
        except GroupError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "protocol_type": None,
                    "protocol_name": None, "assignment": b""}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "protocol_type": ptype,
                "protocol_name": pname, "assignment": assignment}

    async def _heartbeat(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if not may_use_group(ctx, body["group_id"]):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        if not coordinates(self.broker):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR}
        beat = self.consumer_groups.classic_heartbeat if self.consumer_groups.has_members(body["group_id"]) \
            else self.coordinator.heartbeat
        code = beat(body["group_id"], body["generation_id"], body["member_id"], body["group_instance_id"])
        return {"throttle_time_ms": 0, "error_code": code}

    async def _leave_group(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        group_id = body["group_id"]
        if not may_use_group(ctx, group_id):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
        if not coordinates(self.broker):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR, "members": []}
        leave = self.consumer_groups.classic_leave if self.consumer_groups.has_members(group_id) \
            else self.coordinator.leave
        if ctx.api_version < 3:
            code = leave(group_id, body["member_id"], None)
            return {"throttle_time_ms": 0, "error_code": code, "members": []}
        members = [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                    "error_code": leave(group_id, m["member_id"], m["group_instance_id"])}
                   for m in body["members"]]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "members": members}

    async def _describe_groups(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        groups = []
        for group_id in dict.fromkeys(body["groups"]):  # each once: members times repeats made GBs
            group = self.coordinator.groups.get(group_id)
            refused = (ErrorCode.GROUP_AUTHORIZATION_FAILED if not may_use_group(ctx, group_id)
                       else ErrorCode.NOT_COORDINATOR if not coordinates(self.broker) else None)
            if refused is not None:
                groups.append({"error_code": refused, "group_id": group_id,
                               "group_state": "", "protocol_type": "", "protocol_data": "", "members": []})
                continue
            if group is None:
                groups.append({"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": "Dead",
                               "protocol_type": "", "protocol_data": "", "members": []})
                continue
            stable = group.state is GroupState.STABLE
            groups.append({
                "error_code": ErrorCode.NONE, "group_id": group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "", "protocol_data": group.protocol_name or "",
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "member_metadata": m.metadata_for(group.protocol_name or "") if stable else b"",
                             "member_assignment": m.assignment if stable else b""}
                            for m in group.members.values()],
            })
        return {"throttle_time_ms": 0, "groups": groups}

    async def _list_groups(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if not coordinates(self.broker):  # a slave (or a demoted master) coordinates no group
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": []}
        states = {s.lower() for s in body["states_filter"]}
        types = {t.lower() for t in body["types_filter"]}
        found = [(g.group_id, g.protocol_type or "", g.state.value, "classic") for g in self.coordinator.groups.values()]
        found += [(g.group_id, "consumer", g.state, "consumer") for g in self.consumer_groups.groups.values()]
        groups = [{"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": gtype}
                  for gid, ptype, state, gtype in found
                  if (not states or state.lower() in states) and (not types or gtype in types)
                  and may_use_group(ctx, gid)]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}

    async def _offset_commit(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        group_id = body["group_id"]
        if not may_use_group(ctx, group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif not coordinates(self.broker):
            code = ErrorCode.NOT_COORDINATOR
        else:
            code = self.consumer_groups.validate_commit(group_id, body["member_id"],
                                                        body["generation_id_or_member_epoch"], ctx.api_version)
            if code is None and ctx.api_version >= 9 and body["generation_id_or_member_epoch"] >= 0 \
                    and group_id not in self.coordinator.groups:
                code = ErrorCode.GROUP_ID_NOT_FOUND  # Kafka's answer from v9 (older: ILLEGAL_GENERATION)
            if code is None:
                code = self.coordinator.validate_commit(group_id, body["generation_id_or_member_epoch"],
                                                        body["member_id"], body["group_instance_id"])
        topics = []
        committed = False
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                pcode = code
                if pcode == ErrorCode.NONE:
                    if not may_use_topic(ctx, t["name"], SUB):
                        pcode = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    elif not has_partition(self.broker, t["name"], p["partition_index"]):
                        pcode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif not fits(p["committed_metadata"], OFFSET_METADATA_MAX_BYTES):
                        pcode = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    else:
                        self.broker.commit_offset(group_id, t["name"], p["partition_index"],
                                                  p["committed_offset"], p["committed_metadata"])
                        committed = True
                partitions.append({"partition_index": p["partition_index"], "error_code": pcode})
            topics.append({"name": t["name"], "partitions": partitions})
        if committed:  # answered once on disk, as Kafka answers after its __consumer_offsets write
            try:
                await self.broker.offsets_durable()
            except OSError:  # the commits stay in memory; the client is told they may not
                for t in topics:
                    for p in t["partitions"]:
                        if p["error_code"] == ErrorCode.NONE:
                            p["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return {"throttle_time_ms": 0, "topics": topics}

    def _committed(self, group_id: str, topics: list[dict[str, Any]] | None,
                   require_stable: bool = False) -> list[dict[str, Any]]:
        if topics is None:  # offsets committed (by remoting) on names no topic can have are not listed
            wanted = [(name, sorted(offsets)) for name, offsets in self.broker.group_offsets(group_id).items()
                      if _is_topic_name(name)]
        else:
            wanted = [(t["name"], t["partition_indexes"]) for t in topics]
        return [{"name": name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT}
            if require_stable and self.broker.has_pending_txn_offsets(group_id, name, i) else
            {"partition_index": i, "committed_offset": self.broker.query_offset(group_id, name, i),
             "committed_leader_epoch": -1, "metadata": self.broker.query_offset_metadata(group_id, name, i),
             "error_code": ErrorCode.NONE}
            for i in indexes]} for name, indexes in wanted]

    @staticmethod
    def _each_group_once(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The first entry naming each group: a group is answered once however often named."""
        first: dict[str, dict[str, Any]] = {}
        for g in groups:
            first.setdefault(g["group_id"], g)
        return list(first.values())

    async def _offset_fetch(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if ctx.api_version >= 8:
            groups = []
            for g in self._each_group_once(body["groups"]):
                code = ErrorCode.GROUP_AUTHORIZATION_FAILED if not may_use_group(ctx, g["group_id"]) else \
                    ErrorCode.NOT_COORDINATOR if not coordinates(self.broker) else \
                    self.consumer_groups.validate_fetch(g["group_id"], g["member_id"], g["member_epoch"])
                groups.append({"group_id": g["group_id"], "error_code": code,
                               "topics": self._committed(g["group_id"], g["topics"], body["require_stable"])
                               if code == ErrorCode.NONE else []})
            return {"throttle_time_ms": 0, "groups": groups}
        if not may_use_group(ctx, body["group_id"]):
            return {"throttle_time_ms": 0, "topics": [], "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        if not coordinates(self.broker):
            return {"throttle_time_ms": 0, "topics": [], "error_code": ErrorCode.NOT_COORDINATOR}
        return {"throttle_time_ms": 0,
                "topics": self._committed(body["group_id"], body["topics"], body["require_stable"]),
                "error_code": ErrorCode.NONE}
