"""Kafka's cluster APIs: ApiVersions, Metadata, FindCoordinator, ListOffsets and
OffsetForLeaderEpoch, what a client asks before it produces or consumes (this broker is the
whole cluster: every partition's leader, every group's and transactional id's coordinator).

Like every handler family it turns a decoded request into a response dict, calls only the
Broker facade and never touches a socket; bad input is an error code in the answer.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from rocketport.core.auth.plain_acl import PUB
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError

from .codec import Encoded, item_encoder
from .error_map import error_code_for
from .consumer_group_log import GROUP_STATE_TOPIC
from .errors import ErrorCode
from .requests import (
    BrokerNode,
    Handler,
    RequestContext,
    coordinates,
    epoch_error,
    group_leader,
    has_partition,
    may_use_group,
    may_use_topic,
    partitions,
    replica_ids,
)
from .schema import APIS, ApiKey
from .topic_ids import TopicIds

_LATEST: Final = -1
_EARLIEST: Final = -2
_MAX_TIMESTAMP: Final = -3
# The transaction protocol v2 (KIP-890 part 2), finalized as the feature transaction.version 2,
# as a Kafka 4 cluster does: its clients then add partitions and groups with Produce v12 and
# TxnOffsetCommit v5 (no AddPartitionsToTxn or AddOffsetsToTxn), and EndTxn v5 bumps the epoch.
TRANSACTION_VERSION: Final = 2
# Metadata's encoded topic parts kept (see _EncodedTopics): per answer version and state,
# and states (versions clients use, and states before a failover)
MAX_ENCODED_TOPICS: Final = 250_000
ENCODED_STATES: Final = 4


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


class ClusterHandlers:
    """ApiVersions, Metadata, FindCoordinator, ListOffsets, OffsetForLeaderEpoch."""

    def __init__(self, broker: Broker, node: BrokerNode, topic_ids: TopicIds) -> None:
        self.broker = broker
        self.node = node
        # a group's members are its nodes (core/ha), each by its own brokerId for life: after
        # an election (core/ha/election.py) only the partitions' leader changes, so a client
        # keeps the connection it has to the promoted node, and no backoff it built against
        # the dead master's id carries over to the new one
        node.node_id = broker.config.broker_id
        self.topic_ids = topic_ids
        self._encoded = _EncodedTopics()
        self.cluster_id = f"rocketport-{broker.config.broker_cluster_name}"
        self.table: dict[int, Handler] = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.METADATA: self._metadata,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
        }

    async def _api_versions(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        return api_versions_body(ErrorCode.NONE, ctx.api_version)

    async def _metadata(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        requested = body["topics"]
        if requested is None or (ctx.api_version == 0 and not requested):
            names = [n for n in self.broker.topic_names() if may_use_topic(ctx, n)]
            auto_create = False
        else:
            # each topic once, as Kafka does with a set; v10+ may name a topic by its id
            names = list(dict.fromkeys(
                t["name"] if t["name"] is not None else (self.topic_ids.name_of(t["topic_id"]), t["topic_id"])
                for t in requested))
            auto_create = body["allow_auto_topic_creation"] and self.broker.config.auto_create_topic_enable
        topics: list[dict[str, Any] | Encoded] = []
        shared = self._partition_state()
        encoded = self._encoded.at(ctx.api_version, shared)
        for entry in names:
            if isinstance(entry, tuple):  # asked by id: found (no auto-creation by id) or UNKNOWN_TOPIC_ID
                name, raw = entry
                if name is None or not may_use_topic(ctx, name):
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": "" if ctx.api_version < 12
                                   else None, "topic_id": raw, "is_internal": False, "partitions": []})
                else:  # (v10-11 answers have no null name)
                    topics.append(self._topic_metadata(name, False, shared, encoded))
            elif not may_use_topic(ctx, entry):
                topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": entry,
                               "topic_id": bytes(16), "is_internal": False, "partitions": []})
            else:
                topics.append(self._topic_metadata(entry, auto_create and may_use_topic(ctx, entry, PUB),
                                                   shared, encoded))
        peers = self.broker.ha.peers
        brokers = [(ctx.node or self.node).node()] + [{"node_id": i, "host": h, "port": p, "rack": None}
                                        for i, (h, p) in sorted(peers.items())]
        leader = group_leader(self.broker, self.node)
        return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": self.cluster_id,
                "controller_id": leader, "topics": topics}

    def _partition_state(self) -> tuple[int, list[int], list[int], int, int]:
        """(leader, replicas, ISR, error code, leader epoch): the same for every partition
        (every member of the broker group replicates every partition, core/ha): the leader
        is the master, the ISR the members in sync (a slave's produce:
        NOT_LEADER_OR_FOLLOWER); the election's epoch rises after each failover, so clients
        drop metadata from a node that has not seen the new master yet (KIP-320)."""
        leader = group_leader(self.broker, self.node)
        replicas, isr = replica_ids(self.broker, self.node)
        code = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
        return leader, replicas, isr, code, self.broker.leader_epoch()

    def _topic_metadata(self, name: str, auto_create: bool,
                        shared: tuple[int, list[int], list[int], int, int],
                        encoded: _TopicParts) -> dict[str, Any] | Encoded:
        """A topic's part of the answer; a found topic's as ``encoded`` has it (its bytes
        depend only on its name and partition count then), else encoded into it."""
        n = partitions(self.broker, name)
        if n is not None:
            done = encoded.get(name, n)
            if done is not None:
                return done
        out: dict[str, Any] = {"error_code": ErrorCode.NONE, "name": name, "topic_id": bytes(16),
                               "is_internal": name == GROUP_STATE_TOPIC, "partitions": []}
        if n is None and auto_create:
            try:
                self.broker.topic_for_write(name)
                n = partitions(self.broker, name)
            except BrokerError as exc:
                out["error_code"] = error_code_for(exc)
                return out
        if n is None:
            out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        out["topic_id"] = self.topic_ids.id_of(name)
        leader, replicas, isr, code, epoch = shared
        out["partitions"] = [{"error_code": code, "partition_index": i, "leader_id": leader,
                              "leader_epoch": epoch, "replica_nodes": replicas, "isr_nodes": isr,
                              "offline_replicas": []} for i in range(n)]
        return encoded.put(name, n, out)

    async def _find_coordinator(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        # the group's master coordinates groups and transactional ids (a slave's offsets are
        # its master's copies), under the same node id as it leads partitions
        node = ctx.node or self.node
        node_id, host, port = node.node_id, node.host, node.port
        leader = group_leader(self.broker, self.node)
        if leader != node_id and leader in self.broker.ha.peers:
            node_id, (host, port) = leader, self.broker.ha.peers[leader]
        keys = body["coordinator_keys"] if ctx.api_version >= 4 else [body["key"]]
        # group keys need the group's permission; this broker coordinates every transactional id too
        codes = [ErrorCode.NONE if body["key_type"] != 0 or may_use_group(ctx, k)
                 else ErrorCode.GROUP_AUTHORIZATION_FAILED for k in keys]
        if node_id == node.node_id and not coordinates(self.broker):  # a slave with no master known
            node_id, host, port = -1, "", -1  # (an election under way): the client asks again
            codes = [code or ErrorCode.COORDINATOR_NOT_AVAILABLE for code in codes]
        return {"throttle_time_ms": 0, "error_code": codes[0] if codes else ErrorCode.NONE, "error_message": None,
                "node_id": node_id, "host": host, "port": port,
                "coordinators": [{"key": k, "node_id": node_id, "host": host, "port": port,
                                  "error_code": code, "error_message": None} for k, code in zip(keys, codes)]}

    async def _list_offsets(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        broker = self.broker
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                index, ts = p["partition_index"], p["timestamp"]
                out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE,
                                       "old_style_offsets": [], "timestamp": -1, "offset": -1,
                                       "leader_epoch": broker.leader_epoch()}
                partitions.append(out)
                if not may_use_topic(ctx, t["name"]):
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if not has_partition(self.broker, t["name"], index):
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                out["error_code"] = epoch_error(broker, p["current_leader_epoch"])
                if out["error_code"]:
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

    async def _offset_for_leader_epoch(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        """Where each asked epoch ended in a partition (the election's epoch history), so a
        consumer that followed an older master checks its position after a failover."""
        broker = self.broker
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                index = p["partition"]
                out: dict[str, Any] = {"error_code": ErrorCode.NONE, "partition": index,
                                       "leader_epoch": -1, "end_offset": -1}
                partitions.append(out)
                if not may_use_topic(ctx, t["topic"]):
                    out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not has_partition(broker, t["topic"], index):
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif broker.config.is_slave:  # only the leader answers (a follower's history may lag)
                    out["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    out["error_code"] = epoch_error(broker, p["current_leader_epoch"])
                    if not out["error_code"]:
                        out["leader_epoch"], out["end_offset"] = broker.epoch_end_offset(
                            t["topic"], index, p["leader_epoch"])
            topics.append({"topic": t["topic"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}


class _TopicParts:
    """The encoded topic parts of Metadata answers of one version and partition state."""

    __slots__ = ("encode", "parts")

    def __init__(self, version: int) -> None:
        self.encode = item_encoder(ApiKey.METADATA, version, "topics")
        self.parts: dict[tuple[str, int], Encoded] = {}

    def get(self, name: str, partitions: int) -> Encoded | None:
        return self.parts.get((name, partitions))

    def put(self, name: str, partitions: int, topic: dict[str, Any]) -> Encoded:
        done = self.encode(topic)
        if len(self.parts) >= MAX_ENCODED_TOPICS:  # deleted topics' parts go now and then
            self.parts.clear()
        self.parts[(name, partitions)] = done
        return done


class _EncodedTopics:
    """Metadata's topic parts as encoded, by (name, partition count), for each answer
    version and partition state (leader, replicas, ISR, epoch): a client asking for the
    metadata of 25,000 topics is answered from bytes, not by building and encoding 100,000
    partition structs each time (about 0.3 KB a topic kept). A new state (a failover, a
    slave joining) starts afresh; the least recent of more than ENCODED_STATES goes."""

    def __init__(self) -> None:
        self.states: dict[tuple, _TopicParts] = {}

    def at(self, version: int, state: tuple[int, list[int], list[int], int, int]) -> _TopicParts:
        leader, replicas, isr, code, epoch = state
        key = (version, leader, tuple(replicas), tuple(isr), code, epoch)
        parts = self.states.pop(key, None)
        if parts is None:
            parts = _TopicParts(version)
            if len(self.states) >= ENCODED_STATES:
                self.states.pop(next(iter(self.states)))
        self.states[key] = parts  # the most recent last
        return parts
