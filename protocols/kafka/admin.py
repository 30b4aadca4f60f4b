"""Kafka's admin APIs: topics (CreateTopics, DeleteTopics, CreatePartitions), their
configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs; kept as topic attributes
across restarts) and DeleteRecords. Each needs an admin account when SASL is on.

Like every handler family it turns a decoded request into a response dict, calls only the
Broker facade and never touches a socket; bad input is an error code in the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import validate_topic

from .error_map import error_code_for
from .errors import ErrorCode
from .fetch import PlainRecordEncoder
from .requests import (
    OFFSET_METADATA_MAX_BYTES,
    Handler,
    RequestContext,
    has_partition,
    is_admin,
    may_use_topic,
    partitions,
)
from .schema import ApiKey
from .topic_configs import TOPIC_CONFIGS, ConfigType, InvalidConfig, described, validate
from .topic_ids import TopicIds

log = logging.getLogger(__name__)

_RESOURCE_TOPIC: Final = 2
# a CreateTopics of up to this many topics is answered once their queue files are made (their
# first records then find them); a larger one once the topics are durable, its files going
# on being made in the background (a first record finds it made or makes it): waiting for
# thousands of files (~1 ms each on a busy disk) made creation cost 5 s per 1,000 topics
_WAIT_FOR_FILES_UP_TO: Final = 16
_RESOURCE_BROKER: Final = 4
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


class AdminHandlers:
    """CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
    IncrementalAlterConfigs, DeleteRecords."""

    def __init__(self, broker: Broker, encoder: PlainRecordEncoder, topic_ids: TopicIds) -> None:
        self.broker = broker
        self.topic_ids = topic_ids
        self.encoder = encoder  # forgets a deleted topic's cached record parts
        self.table: dict[int, Handler] = {
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self._describe_configs,
            ApiKey.ALTER_CONFIGS: self._alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs,
            ApiKey.DELETE_RECORDS: self._delete_records,
        }

    async def _create_topics(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        """All of the request's topics are created in one step, durable together (one
        append and fsync of the topic table's change log), then the files of a few are
        awaited once: a request of many topics costs what they do, not a table save each."""
        n_default = self.broker.config.default_topic_queue_nums
        results = []
        created: list[tuple[dict[str, Any], str, dict[str, str]]] = []
        try:
            with self.broker.topic_changes_together():
                for t in body["topics"]:
                    name, n = t["name"], t["num_partitions"]
                    if n == -1:
                        n = len(t["assignments"]) or n_default
                    out: dict[str, Any] = {"name": name, "topic_id": bytes(16), "error_code": ErrorCode.NONE,
                                           "error_message": None, "num_partitions": n,
                                           "replication_factor": 1, "configs": []}
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
                            self.broker.create_topic(name, read_queue_nums=n, write_queue_nums=n,
                                                     attributes=attributes)
                        except BrokerError as exc:
                            code, message = error_code_for(exc), str(exc)
                    if code != ErrorCode.NONE:
                        out.update(error_code=code, error_message=message, num_partitions=-1,
                                   replication_factor=-1)
                    else:
                        created.append((out, name, attributes))
        except BrokerError as exc:  # the change log could not be written (ENOSPC, EMFILE)
            log.warning("CreateTopics of %d topics refused: %s", len(created), exc)
            for out, _, _ in created:
                out.update(error_code=error_code_for(exc), error_message=str(exc), num_partitions=-1,
                           replication_factor=-1)
            created = []
        if created and not body["validate_only"] and len(created) <= _WAIT_FOR_FILES_UP_TO:
            await self.broker.queues_ready()
        for out, name, attributes in created:
            out["topic_id"] = self.topic_ids.id_of(name)
            out["configs"] = [{k: v for k, v in described(c, attributes, self.broker.config, False).items()
                               if k in ("name", "value", "read_only", "config_source", "is_sensitive")}
                              for c in TOPIC_CONFIGS]
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
        ids = [t["topic_id"] for t in body["topics"]] if ctx.api_version >= 6 else [bytes(16)] * len(names)
        for name, raw in zip(names, ids):
            if name is None:  # v6+ may name the topic by its id
                name = self.topic_ids.name_of(raw)
            out: dict[str, Any] = {"name": name, "topic_id": raw, "error_code": ErrorCode.NONE,
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
            out["topic_id"] = self.topic_ids.id_of(name)
        return {"throttle_time_ms": 0, "responses": responses}

    async def _create_partitions(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        for t in body["topics"]:
            name, count = t["name"], t["count"]
            out: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
            results.append(out)
            current = partitions(self.broker, name)
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
            values = {"broker.id": str(config.broker_id), "message.max.bytes": str(config.max_message_size),
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
                if not has_partition(self.broker, t["name"], index):
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
