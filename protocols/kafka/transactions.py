"""Kafka's producer-id and transaction APIs: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, ListTransactions and DescribeTransactions, mapped
onto the core's transaction coordinator (core/txn), which keeps the state in the log.

Like every handler family it turns a decoded request into a response dict, calls only the
Broker facade (and the group coordinator, to check a transactional commit's member) and
never touches a socket; a coordinator refusal is an error code in the answer.
"""

from __future__ import annotations

from typing import Any, Final

from rocketport.core.auth.plain_acl import PUB, SUB
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import ProducerFenced, TxnState

from .consumer_groups import ConsumerGroupCoordinator
from .coordinator import GroupCoordinator
from .error_map import error_code_for
from .errors import ErrorCode
from .requests import (
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

TXN_V2_END_TXN: Final = 5  # the transaction protocol v2 (see cluster.TRANSACTION_VERSION)
TXN_V2_TXN_OFFSET_COMMIT: Final = 5


def _txn_code(exc: BaseException, knows_producer_fenced: bool) -> ErrorCode:
    """A coordinator refusal's code; PRODUCER_FENCED only for versions whose clients know it
    (older ones hear INVALID_PRODUCER_EPOCH, as Kafka answers them)."""
    if isinstance(exc, ProducerFenced) and knows_producer_fenced:
        return ErrorCode.PRODUCER_FENCED
    return error_code_for(exc)


class TransactionHandlers:
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
    ListTransactions, DescribeTransactions."""

    def __init__(self, broker: Broker, coordinator: GroupCoordinator,
                 consumer_groups: ConsumerGroupCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.consumer_groups = consumer_groups
        self.table: dict[int, Handler] = {
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self._add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self._add_offsets_to_txn,
            ApiKey.TXN_OFFSET_COMMIT: self._txn_offset_commit,
            ApiKey.END_TXN: self._end_txn,
            ApiKey.LIST_TRANSACTIONS: self._list_transactions,
            ApiKey.DESCRIBE_TRANSACTIONS: self._describe_transactions,
        }

    async def _init_producer_id(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if body["transactional_id"] is not None:  # the core's transaction coordinator
            if not coordinates(self.broker):
                return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR,
                        "producer_id": -1, "producer_epoch": -1}
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
                elif not has_partition(self.broker, name, p):
                    codes[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not coordinates(self.broker):
            code = ErrorCode.NOT_COORDINATOR
        elif codes:  # as Kafka: nothing is added when one partition cannot be
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
        if not coordinates(self.broker):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR}
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
        if not may_use_group(ctx, group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif not coordinates(self.broker):
            code = ErrorCode.NOT_COORDINATOR
        else:
            code = self.consumer_groups.validate_commit(group_id, body["member_id"], body["generation_id"],
                                                        ctx.api_version, transactional=True)
            if code is None:  # not a KIP-848 group: the classic coordinator's rule
                code = self.coordinator.validate_commit(group_id, body["generation_id"], body["member_id"],
                                                        body["group_instance_id"], transactional=True)
        codes: dict[tuple[str, int], ErrorCode] = {}
        offsets = []
        for t in body["topics"]:
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                if code != ErrorCode.NONE:
                    codes[key] = code
                elif not may_use_topic(ctx, t["name"], SUB):
                    codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not has_partition(self.broker, *key):
                    codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif not fits(p["committed_metadata"], OFFSET_METADATA_MAX_BYTES):
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
        if not coordinates(self.broker):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR,
                    "producer_id": -1, "producer_epoch": -1}
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
