"""Request handlers: one coroutine per Kafka API, from a decoded request to a response dict.

Each handler translates between Kafka's vocabulary and the Broker facade (partition =
queue id, offset = ConsumeQueue offset, consumer-group offsets in the shared offset store);
Produce and Fetch live in their own modules, the group protocol in ``coordinator``.
Handlers return the response body as a dict for the codec, or None when Kafka wants no
response (Produce with acks=0). They never touch sockets and never raise for client input:
bad input becomes an error code in the response.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from rocketport.core.auth.plain_acl import ANY, PUB, SUB, Account, PlainAcl, group_resource
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.metadata.topics import validate_topic
from rocketport.core.txn.coordinator import TxnState
from rocketport.core.txn.errors import ProducerFenced

from .coordinator import GroupCoordinator, GroupError, GroupState
from .error_map import error_code_for
from .errors import ErrorCode
from .fetch import FetchHandler, PlainRecordEncoder
from .produce import ProduceHandler
from .sasl import SaslPlain
from .schema import APIS, ApiKey
from .topic_configs import TOPIC_CONFIGS, ConfigType, InvalidConfig, described, validate

log = logging.getLogger(__name__)

NODE_ID: Final = 0  # this broker is the whole cluster: leader of every partition
_LATEST: Final = -1
_EARLIEST: Final = -2
_MAX_TIMESTAMP: Final = -3
_RESOURCE_TOPIC: Final = 2
_RESOURCE_BROKER: Final = 4
_MAX_STRING: Final = 0x7FFF  # UTF-8 bytes an int16-length string (every non-flexible version) holds
OFFSET_METADATA_MAX_BYTES: Final = 4096  # Kafka's offset.metadata.max.bytes
_ID_SUFFIX: Final = 37  # "-" and a UUID: the coordinator makes member ids of a client or instance id
# The transaction protocol v2 (KIP-890 part 2), finalized as the feature transaction.version 2,
# as a Kafka 4 cluster does: its clients then add partitions and groups with Produce v12 and
# TxnOffsetCommit v5 (no AddPartitionsToTxn or AddOffsetsToTxn), and EndTxn v5 bumps the epoch.
TRANSACTION_VERSION: Final = 2
TXN_V2_PRODUCE: Final = 12
TXN_V2_END_TXN: Final = 5
TXN_V2_TXN_OFFSET_COMMIT: Final = 5


def _fits(text: str | None, room: int = _MAX_STRING) -> bool:
    return text is None or len(text) * 4 <= room or len(text.encode("utf-8")) <= room


def _is_topic_name(name: str) -> bool:
    try:
        validate_topic(name)
    except BrokerError:
        return False
    return True


_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations


def _apply_ops(current: dict[str, str], ops: list[dict[str, Any]]) -> dict[str, str]:
    """A topic's configs after IncrementalAlterConfigs' operations; InvalidConfig when one
    cannot apply (APPEND and SUBTRACT only work on list configs)."""
    result = dict(current)
    for op in ops:
        name, kind, value = op["name"], op["config_operation"], op["value"]
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"unknown topic config {name!r}")
        if kind == _SET:
            validate(name, value)
            result[name] = value
        elif kind == _DELETE:
            result.pop(name, None)
        elif kind in (_APPEND, _SUBTRACT):
            if TOPIC_CONFIGS[name].type != ConfigType.LIST or value is None:
                raise InvalidConfig(f"{name}: APPEND and SUBTRACT need a list config and a value")
            items = [v for v in result.get(name, "").split(",") if v]
            changes = [v.strip() for v in value.split(",") if v.strip()]
            if kind == _APPEND:
                items += [v for v in changes if v not in items]
            else:
                items = [v for v in items if v not in changes]
            if items:
                result[name] = ",".join(items)
            else:
                result.pop(name, None)
        else:
            raise InvalidConfig(f"{name}: unknown operation {kind}")
    return result


def _txn_code(exc: BaseException, knows_producer_fenced: bool) -> ErrorCode:
    """A coordinator refusal's code; PRODUCER_FENCED only for versions whose clients know it
    (older ones hear INVALID_PRODUCER_EPOCH, as Kafka answers them)."""
    if isinstance(exc, ProducerFenced) and knows_producer_fenced:
        return ErrorCode.PRODUCER_FENCED
    return error_code_for(exc)


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_version: int
    client_id: str | None
    client_host: tuple[str, int]
    principal: Account | None = None  # the SASL-authenticated account; None: SASL is off


Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any] | None]]


def may_use_topic(ctx: RequestContext, topic: str, needed: int = ANY) -> bool:
    """SASL authorization by the plain ACL's permissions (PUB to produce, SUB to read, either
    to see a topic); always true without SASL."""
    return ctx.principal is None or ctx.principal.permits(topic, needed)


def may_use_group(ctx: RequestContext, group: str) -> bool:
    return ctx.principal is None or ctx.principal.permits(group_resource(group), SUB)


def is_admin(ctx: RequestContext) -> bool:
    return ctx.principal is None or ctx.principal.admin


@cache
def api_versions_body(error_code: ErrorCode = ErrorCode.NONE, version: int = 0) -> dict[str, Any]:
    """Every served API from version 0 (old librdkafka checks single versions, not ranges), and
    (v3+) the transaction.version feature. Built once per answer kind: the encoder only reads it."""
    body: dict[str, Any] = {"error_code": error_code, "throttle_time_ms": 0,
                            "api_keys": [{"api_key": key, "min_version": 0, "max_version": api.versions[1]}
                                         for key, api in sorted(APIS.items())]}
    if version >= 3:
        # below v4 a supported feature whose minimum is 0 is left out (KAFKA-17492: some
        # clients failed to read it); the finalized level is there for every version
        body["supported_features"] = [] if version < 4 else [
            {"name": "transaction.version", "min_version": 0, "max_version": TRANSACTION_VERSION}]
        body["finalized_features_epoch"] = 0
        body["finalized_features"] = [{"name": "transaction.version", "max_version_level": TRANSACTION_VERSION,
                                       "min_version_level": TRANSACTION_VERSION}]
    return body


class KafkaHandlers:
    """The Kafka front-end's request handling, shared by every connection."""

    def __init__(self, broker: Broker, advertised: tuple[str, int]) -> None:
        self.broker = broker
        self.advertised = advertised
        config = broker.config
        self.cluster_id = f"rocketport-{config.broker_cluster_name}"
        self.coordinator = GroupCoordinator()
        self.encoder = PlainRecordEncoder(config.kafka_tag_header)
        self.produce = ProduceHandler(broker, config.kafka_tag_header)
        self.fetch = FetchHandler(broker, self.encoder)
        self.sasl = SaslPlain(PlainAcl(config.plain_acl_file)) if config.kafka_sasl_mechanisms else None
        self.table: dict[int, Handler] = {
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.METADATA: self._metadata,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.SYNC_GROUP: self._sync_group,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.DELETE_RECORDS: self._delete_records,
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self._add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self._add_offsets_to_txn,
            ApiKey.END_TXN: self._end_txn,
            ApiKey.TXN_OFFSET_COMMIT: self._txn_offset_commit,
            ApiKey.LIST_TRANSACTIONS: self._list_transactions,
            ApiKey.DESCRIBE_TRANSACTIONS: self._describe_transactions,
            ApiKey.DESCRIBE_CONFIGS: self._describe_configs,
            ApiKey.ALTER_CONFIGS: self._alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
        }

    def close(self) -> None:
        self.coordinator.close()

    # ------------------------------------------------------------------ helpers
    def _partitions(self, topic: str) -> int | None:
        cfg = self.broker.get_topic(topic)
        return None if cfg is None else min(cfg.read_queue_nums, cfg.write_queue_nums)

    def _has_partition(self, topic: str, partition: int) -> bool:
        n = self._partitions(topic)
        return n is not None and 0 <= partition < n

    def _broker_node(self) -> dict[str, Any]:
        host, port = self.advertised
        return {"node_id": NODE_ID, "host": host, "port": port, "rack": None}

    # ------------------------------------------------------------------ ApiVersions / Metadata
    async def _api_versions(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        return api_versions_body(ErrorCode.NONE, ctx.api_version)

    async def _metadata(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        requested = body["topics"]
        if requested is None or (ctx.api_version == 0 and not requested):
            names = [n for n in self.broker.topic_names() if may_use_topic(ctx, n)]
            auto_create = False
        else:
            # each topic once, as Kafka does with a set (by id, all alike here: none is known)
            names = list(dict.fromkeys(t["name"] for t in requested))
            auto_create = body["allow_auto_topic_creation"] and self.broker.config.auto_create_topic_enable
        topics = []
        for name in names:
            if name is not None and not may_use_topic(ctx, name):
                topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                               "topic_id": bytes(16), "is_internal": False, "partitions": []})
                continue
            topics.append(self._topic_metadata(name, auto_create and (name is None or may_use_topic(ctx, name, PUB))))
            if name is None and ctx.api_version < 12:  # by id in v10-11, whose answer has no null name
                topics[-1]["name"] = ""
        return {"throttle_time_ms": 0, "brokers": [self._broker_node()], "cluster_id": self.cluster_id,
                "controller_id": NODE_ID, "topics": topics}

    def _topic_metadata(self, name: str | None, auto_create: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"error_code": ErrorCode.NONE, "name": name, "topic_id": bytes(16),
                               "is_internal": False, "partitions": []}
        if name is None:  # v10+ asks by topic id, which this broker does not assign
            out["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
            return out
        n = self._partitions(name)
        if n is None and auto_create:
            try:
                self.broker.topic_for_write(name)
                n = self._partitions(name)
            except BrokerError as exc:
                out["error_code"] = error_code_for(exc)
                return out
        if n is None:
            out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        out["partitions"] = [{"error_code": ErrorCode.NONE, "partition_index": i, "leader_id": NODE_ID,
                              "leader_epoch": 0, "replica_nodes": [NODE_ID], "isr_nodes": [NODE_ID],
                              "offline_replicas": []} for i in range(n)]
        return out

    # ------------------------------------------------------------------ Produce / Fetch / ListOffsets
    async def _produce(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any] | None:
        may_write = None if ctx.principal is None else (lambda topic: may_use_topic(ctx, topic, PUB))
        response = await self.produce.handle(body, ctx.client_host, may_write,
                                             adds_partitions=ctx.api_version >= TXN_V2_PRODUCE)
        return None if body["acks"] == 0 else response

    async def _fetch(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        may_read = None if ctx.principal is None else (lambda topic: may_use_topic(ctx, topic, SUB))
        return await self.fetch.handle(body, may_read, ctx.client_host)

    async def _list_offsets(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        broker = self.broker
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                index, ts = p["partition_index"], p["timestamp"]
                out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE,
                                       "old_style_offsets": [], "timestamp": -1, "offset": -1,
                                       "leader_epoch": 0}
                partitions.append(out)
                if not may_use_topic(ctx, t["name"]):
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if not self._has_partition(t["name"], index):
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                high = broker.max_offset(t["name"], index) if body["isolation_level"] != 1 \
                    else broker.last_stable_offset(t["name"], index)  # read_committed: the LSO
                if ts == _EARLIEST:
                    offset = broker.min_offset(t["name"], index)
                elif ts in (_LATEST, _MAX_TIMESTAMP):
                    offset = high
                else:  # by the records' own timestamps, answering the one found
                    offset, found_ts = broker.offset_by_record_timestamp(t["name"], index, ts)
                    if found_ts < 0:  # nothing at or after ts: Kafka answers -1
                        offset = -1
                    else:
                        out["timestamp"] = found_ts
                out["offset"] = offset
                out["old_style_offsets"] = [offset] if offset >= 0 else []
            topics.append({"name": t["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------------ groups
    async def _find_coordinator(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        host, port = self.advertised
        keys = body["coordinator_keys"] if ctx.api_version >= 4 else [body["key"]]
        # group keys need the group's permission; this broker coordinates every transactional id too
        codes = [ErrorCode.NONE if body["key_type"] != 0 or may_use_group(ctx, k)
                 else ErrorCode.GROUP_AUTHORIZATION_FAILED for k in keys]
        return {"throttle_time_ms": 0, "error_code": codes[0] if codes else ErrorCode.NONE, "error_message": None,
                "node_id": NODE_ID, "host": host, "port": port,
                "coordinators": [{"key": k, "node_id": NODE_ID, "host": host, "port": port,
                                  "error_code": code, "error_message": None} for k, code in zip(keys, codes)]}

    async def _join_group(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        try:
            # What a group keeps is echoed to its members and to DescribeGroups and ListGroups
            # at any version: a string only flexible versions can carry (a 40 KB group id)
            # would make those responses unencodable for everyone else.
            if not _fits(body["group_id"]):
                raise GroupError(ErrorCode.INVALID_GROUP_ID, body["member_id"])
            if not (all(map(_fits, (body["member_id"], body["protocol_type"], *(p["name"] for p in body["protocols"]))))
                    and _fits(body["group_instance_id"], _MAX_STRING - _ID_SUFFIX)
                    and _fits(ctx.client_id, _MAX_STRING - _ID_SUFFIX)):
                raise GroupError(ErrorCode.INVALID_REQUEST, body["member_id"])
            if not may_use_group(ctx, body["group_id"]):
                raise GroupError(ErrorCode.GROUP_AUTHORIZATION_FAILED, body["member_id"])
            result = await self.coordinator.join(
                body["group_id"], body["member_id"], body["group_instance_id"], ctx.client_id or "",
                ctx.client_host[0], body["session_timeout_ms"], body["rebalance_timeout_ms"],
                body["protocol_type"], [(p["name"], p["metadata"]) for p in body["protocols"]],
                require_known_member_id=ctx.api_version >= 4)
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
        code = self.coordinator.heartbeat(body["group_id"], body["generation_id"], body["member_id"],
                                          body["group_instance_id"])
        return {"throttle_time_ms": 0, "error_code": code}

    async def _leave_group(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        group_id = body["group_id"]
        if not may_use_group(ctx, group_id):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
        if ctx.api_version < 3:
            code = self.coordinator.leave(group_id, body["member_id"], None)
            return {"throttle_time_ms": 0, "error_code": code, "members": []}
        members = [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                    "error_code": self.coordinator.leave(group_id, m["member_id"], m["group_instance_id"])}
                   for m in body["members"]]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "members": members}

    async def _describe_groups(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        groups = []
        for group_id in dict.fromkeys(body["groups"]):  # each once: members times repeats made GBs
            group = self.coordinator.groups.get(group_id)
            if not may_use_group(ctx, group_id):
                groups.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id,
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
        states = {s.lower() for s in body["states_filter"]}
        groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                   "group_state": g.state.value, "group_type": "classic"}
                  for g in self.coordinator.groups.values()
                  if (not states or g.state.value.lower() in states) and may_use_group(ctx, g.group_id)]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}

    # ------------------------------------------------------------------ offsets
    async def _offset_commit(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        group_id = body["group_id"]
        code = self.coordinator.validate_commit(group_id, body["generation_id_or_member_epoch"],
                                                body["member_id"], body["group_instance_id"]) \
            if may_use_group(ctx, group_id) else ErrorCode.GROUP_AUTHORIZATION_FAILED
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                pcode = code
                if pcode == ErrorCode.NONE:
                    if not may_use_topic(ctx, t["name"], SUB):
                        pcode = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    elif not self._has_partition(t["name"], p["partition_index"]):
                        pcode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif not _fits(p["committed_metadata"], OFFSET_METADATA_MAX_BYTES):
                        pcode = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    else:
                        self.broker.commit_offset(group_id, t["name"], p["partition_index"],
                                                  p["committed_offset"], p["committed_metadata"])
                partitions.append({"partition_index": p["partition_index"], "error_code": pcode})
            topics.append({"name": t["name"], "partitions": partitions})
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
            groups = [{"group_id": g["group_id"],
                       "topics": self._committed(g["group_id"], g["topics"], body["require_stable"]),
                       "error_code": ErrorCode.NONE} if may_use_group(ctx, g["group_id"]) else
                      {"group_id": g["group_id"], "topics": [], "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
                      for g in self._each_group_once(body["groups"])]
            return {"throttle_time_ms": 0, "groups": groups}
        if not may_use_group(ctx, body["group_id"]):
            return {"throttle_time_ms": 0, "topics": [], "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        return {"throttle_time_ms": 0,
                "topics": self._committed(body["group_id"], body["topics"], body["require_stable"]),
                "error_code": ErrorCode.NONE}

    # ------------------------------------------------------------------ admin
    async def _create_topics(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        n_default = self.broker.config.default_topic_queue_nums
        results = []
        for t in body["topics"]:
            name, n = t["name"], t["num_partitions"]
            if n == -1:
                n = len(t["assignments"]) or n_default
            out: dict[str, Any] = {"name": name, "topic_id": bytes(16), "error_code": ErrorCode.NONE,
                                   "error_message": None, "num_partitions": n, "replication_factor": 1,
                                   "configs": []}
            results.append(out)
            code, message = self._check_new_topic(name, n, t["replication_factor"]) if is_admin(ctx) \
                else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "creating topics needs an admin account")
            attributes: dict[str, str] = {}
            if code == ErrorCode.NONE:
                try:
                    for c in t["configs"]:
                        validate(c["name"], c["value"])
                        attributes[c["name"]] = c["value"]
                except InvalidConfig as exc:
                    code, message = ErrorCode.INVALID_CONFIG, str(exc)
            if code == ErrorCode.NONE and not body["validate_only"]:
                try:
                    await self.broker.create_topic_ready(name, read_queue_nums=n, write_queue_nums=n,
                                                         attributes=attributes)
                except BrokerError as exc:
                    code, message = error_code_for(exc), str(exc)
            if code != ErrorCode.NONE:
                out.update(error_code=code, error_message=message, num_partitions=-1, replication_factor=-1)
            else:
                out["configs"] = [{k: v for k, v in described(name, attributes, self.broker.config, False).items()
                                   if k in ("name", "value", "read_only", "config_source", "is_sensitive")}
                                  for name in TOPIC_CONFIGS]
        return {"throttle_time_ms": 0, "topics": results}

    def _check_new_topic(self, name: str, partitions: int, replication: int) -> tuple[ErrorCode, str | None]:
        try:
            validate_topic(name)
        except BrokerError as exc:
            return error_code_for(exc), str(exc)
        if self.broker.get_topic(name) is not None:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
        if not 1 <= partitions <= 1024:
            return ErrorCode.INVALID_PARTITIONS, "partitions must be between 1 and 1024"
        if replication not in (-1, 1):
            return ErrorCode.INVALID_REPLICATION_FACTOR, "this broker keeps one replica"
        return ErrorCode.NONE, None

    async def _delete_topics(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if ctx.api_version >= 6:
            names = [t["name"] for t in body["topics"]]
        else:
            names = body["topic_names"]
        responses = []
        for name in names:
            out: dict[str, Any] = {"name": name, "topic_id": bytes(16), "error_code": ErrorCode.NONE,
                                   "error_message": None}
            responses.append(out)
            if name is None:
                out["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not is_admin(ctx):
                out.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           error_message="deleting topics needs an admin account")
                continue
            try:
                self.broker.delete_topic(name)
            except BrokerError as exc:
                out["error_code"] = error_code_for(exc)
                continue
            self.encoder.forget_topic(name)
        return {"throttle_time_ms": 0, "responses": responses}

    async def _create_partitions(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        for t in body["topics"]:
            name, count = t["name"], t["count"]
            out: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
            results.append(out)
            current = self._partitions(name)
            if not is_admin(ctx):
                out.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           error_message="adding partitions needs an admin account")
            elif current is None:
                out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif count <= current or count > 1024:
                out.update(error_code=ErrorCode.INVALID_PARTITIONS,
                           error_message=f"topic has {current} partitions; asked for {count}")
            elif not body["validate_only"]:
                await self.broker.create_topic_ready(name, read_queue_nums=count, write_queue_nums=count)
        return {"throttle_time_ms": 0, "results": results}

    async def _describe_configs(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        config = self.broker.config
        results = []
        for r in body["resources"]:
            out: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                                   "resource_type": r["resource_type"], "resource_name": r["resource_name"],
                                   "configs": []}
            results.append(out)
            keys = r["configuration_keys"]
            if r["resource_type"] == _RESOURCE_TOPIC:
                if not may_use_topic(ctx, r["resource_name"]):
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                topic = self.broker.get_topic(r["resource_name"])
                if topic is None:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                out["configs"] = [described(name, topic.attributes, config, body["include_synonyms"])
                                  for name in TOPIC_CONFIGS if keys is None or name in keys]
                continue
            if r["resource_type"] != _RESOURCE_BROKER:
                out.update(error_code=ErrorCode.INVALID_REQUEST, error_message="unsupported resource type")
                continue
            values = {"broker.id": str(NODE_ID), "message.max.bytes": str(config.max_message_size),
                      "auto.create.topics.enable": str(config.auto_create_topic_enable).lower(),
                      "num.partitions": str(config.default_topic_queue_nums),
                      "offset.metadata.max.bytes": str(OFFSET_METADATA_MAX_BYTES)}
            out["configs"] = [{"name": k, "value": v, "read_only": True, "is_default": True,
                               "config_source": 5, "is_sensitive": False, "synonyms": [],
                               "config_type": 0, "documentation": None}
                              for k, v in values.items() if keys is None or k in keys]
        return {"throttle_time_ms": 0, "results": results}

    async def _alter_configs(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        """The legacy API: the given configs replace the topic's dynamic configs whole."""
        responses = []
        for r in body["resources"]:
            configs = {c["name"]: c["value"] for c in r["configs"]}
            responses.append(self._alter_topic(ctx, r, lambda _current: configs, body["validate_only"]))
        return {"throttle_time_ms": 0, "responses": responses}

    async def _incremental_alter_configs(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        responses = []
        for r in body["resources"]:
            responses.append(self._alter_topic(ctx, r, lambda current, ops=r["configs"]: _apply_ops(current, ops),
                                               body["validate_only"]))
        return {"throttle_time_ms": 0, "responses": responses}

    def _alter_topic(self, ctx: RequestContext, resource: dict[str, Any],
                     change: Callable[[dict[str, str]], dict[str, str | None]],
                     validate_only: bool) -> dict[str, Any]:
        """Validate a topic's new dynamic configs and store them (kept across restart)."""
        name = resource["resource_name"]
        out: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                               "resource_type": resource["resource_type"], "resource_name": name}
        if resource["resource_type"] != _RESOURCE_TOPIC:
            out.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message="only topic configs can be altered on this broker")
            return out
        topic = self.broker.get_topic(name)
        if not is_admin(ctx):
            out.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message="altering configs needs an admin account")
            return out
        if topic is None:
            out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        try:
            new = change(dict(topic.attributes))
            for key, value in new.items():
                validate(key, value)
        except InvalidConfig as exc:
            out.update(error_code=ErrorCode.INVALID_CONFIG, error_message=str(exc))
            return out
        if not validate_only:
            self.broker.set_topic_attributes(name, {k: v for k, v in new.items() if v is not None})
        return out

    async def _delete_records(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        broker = self.broker
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                index = p["partition_index"]
                out: dict[str, Any] = {"partition_index": index, "low_watermark": -1, "error_code": ErrorCode.NONE}
                partitions.append(out)
                if not is_admin(ctx):
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if not self._has_partition(t["name"], index):
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                high = broker.max_offset(t["name"], index)
                offset = high if p["offset"] == -1 else p["offset"]
                if not 0 <= offset <= high:
                    out["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                out["low_watermark"] = broker.delete_records(t["name"], index, offset)
            topics.append({"name": t["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    async def _init_producer_id(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if body["transactional_id"] is not None:  # the core's transaction coordinator
            try:
                pid, epoch = await self.broker.init_transactional_producer(
                    body["transactional_id"], body["transaction_timeout_ms"], body["producer_id"],
                    body["producer_epoch"])
            except BrokerError as exc:
                return {"throttle_time_ms": 0, "error_code": _txn_code(exc, ctx.api_version >= 4),
                        "producer_id": -1, "producer_epoch": -1}
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": epoch}
        pid, epoch = body["producer_id"], body["producer_epoch"]
        if pid >= 0 and 0 <= epoch < 32767:
            epoch += 1  # KIP-360: an existing producer bumps its epoch and restarts sequences
        else:
            pid, epoch = await self.broker.allocate_producer_id(), 0
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": epoch}

    # ------------------------------------------------------------------ transactions (the core's coordinator)
    async def _add_partitions_to_txn(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        wanted: dict[str, list[int]] = {}
        for t in body["v3_and_below_topics"]:
            partitions = wanted.setdefault(t["name"], [])
            partitions += [p for p in dict.fromkeys(t["partitions"]) if p not in partitions]
        codes: dict[tuple[str, int], ErrorCode] = {}
        for name, partitions in wanted.items():
            for p in partitions:
                if not may_use_topic(ctx, name, PUB):
                    codes[(name, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not self._has_partition(name, p):
                    codes[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if codes:  # as Kafka: nothing is added when one partition cannot be
            code = ErrorCode.OPERATION_NOT_ATTEMPTED
        else:
            try:
                await self.broker.add_partitions_to_txn(
                    body["v3_and_below_transactional_id"], body["v3_and_below_producer_id"],
                    body["v3_and_below_producer_epoch"], [(n, p) for n, ps in wanted.items() for p in ps])
                code = ErrorCode.NONE
            except BrokerError as exc:
                code = _txn_code(exc, ctx.api_version >= 2)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes.get((name, p), code)} for p in partitions]}
            for name, partitions in wanted.items()]}

    async def _add_offsets_to_txn(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if not may_use_group(ctx, body["group_id"]):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        try:
            await self.broker.add_offsets_to_txn(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                           body["group_id"])
        except BrokerError as exc:
            return {"throttle_time_ms": 0, "error_code": _txn_code(exc, ctx.api_version >= 2)}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE}

    async def _txn_offset_commit(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        """v5 (the transaction protocol v2) adds the group to the transaction first, as
        AddOffsetsToTxn would."""
        group_id = body["group_id"]
        code = self.coordinator.validate_commit(group_id, body["generation_id"], body["member_id"],
                                                body["group_instance_id"], transactional=True) \
            if may_use_group(ctx, group_id) else ErrorCode.GROUP_AUTHORIZATION_FAILED
        codes: dict[tuple[str, int], ErrorCode] = {}
        offsets = []
        for t in body["topics"]:
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                if code != ErrorCode.NONE:
                    codes[key] = code
                elif not may_use_topic(ctx, t["name"], SUB):
                    codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not self._has_partition(*key):
                    codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif not _fits(p["committed_metadata"], OFFSET_METADATA_MAX_BYTES):
                    codes[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    offsets.append((*key, p["committed_offset"], p["committed_metadata"]))
        if offsets:
            try:
                if ctx.api_version >= TXN_V2_TXN_OFFSET_COMMIT:
                    await self.broker.add_offsets_to_txn(body["transactional_id"], body["producer_id"],
                                                         body["producer_epoch"], group_id)
                await self.broker.txn_offset_commit(body["transactional_id"], body["producer_id"],
                                              body["producer_epoch"], group_id, offsets)
                txn_code = ErrorCode.NONE
            except BrokerError as exc:
                txn_code = _txn_code(exc, ctx.api_version >= 2)
            for topic, partition, _, _ in offsets:
                codes[(topic, partition)] = txn_code
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": codes[(t["name"], p["partition_index"])]}
                for p in t["partitions"]]} for t in body["topics"]]}

    async def _end_txn(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        """v5 (the transaction protocol v2): the epoch moves on at every end, and the answer
        carries the producer id and epoch of the next transaction."""
        try:
            pid, epoch = await self.broker.end_txn(body["transactional_id"], body["producer_id"],
                                                   body["producer_epoch"], body["committed"],
                                                   bump=ctx.api_version >= TXN_V2_END_TXN)
        except BrokerError as exc:
            return {"throttle_time_ms": 0, "error_code": _txn_code(exc, ctx.api_version >= 2),
                    "producer_id": -1, "producer_epoch": -1}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": epoch}

    async def _list_transactions(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        known = {s.value for s in TxnState}
        states = [s for s in body["state_filters"] if s in known]
        unknown = [s for s in body["state_filters"] if s not in known]
        found = [] if unknown and not states else self.broker.transactions_matching(
            states, body["producer_id_filters"], body["duration_filter"])
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
                "transaction_states": [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                                        "transaction_state": m.state.value} for m in found]}

    async def _describe_transactions(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        states = []
        for tid in dict.fromkeys(body["transactional_ids"]):
            meta = self.broker.transaction(tid)
            if meta is None:
                states.append({"error_code": ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": tid,
                               "transaction_state": "", "transaction_timeout_ms": 0,
                               "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
                               "topics": []})
                continue
            topics: dict[str, list[int]] = {}
            for topic, partition in meta.partitions:
                topics.setdefault(topic, []).append(partition)
            states.append({"error_code": ErrorCode.NONE, "transactional_id": tid,
                           "transaction_state": meta.state.value, "transaction_timeout_ms": meta.timeout_ms,
                           "transaction_start_time_ms": meta.start_ms, "producer_id": meta.producer_id,
                           "producer_epoch": meta.producer_epoch,
                           "topics": [{"topic": t, "partitions": sorted(ps)} for t, ps in topics.items()]})
        return {"throttle_time_ms": 0, "transaction_states": states}
