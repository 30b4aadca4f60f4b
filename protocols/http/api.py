"""The JSON API under /api/ (docs/observability.md): what the broker holds, read through
the Broker facade when asked, for scripts and for the console; GETs change nothing, the few
POSTs are `actions`.

Every answer is one JSON document; a bad parameter is a 400 and a missing topic, group or
message a 404, each with ``{"error": why}``. Lists are bounded (MAX_ITEMS) so no request
makes the broker build an answer of unbounded size.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from rocketport.common.message import MessageExt
from rocketport.common.message_id import encode_offset_msg_id
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError, MessageNotFound, TopicNotFound

from ..frontend import FrontEnd
from . import responses
from .actions import Actions
from .metrics import TOPIC_GROUP_SEPARATOR, _version
from .responses import ApiError, Response
from .session import Request

MAX_ITEMS: Final = 10_000  # topics, groups, connections or messages in one answer
MAX_MESSAGES: Final = 32  # messages a lookup returns
PREVIEW_BYTES: Final = 4096  # of a message body
AMQP_VIEW: Final = "amqp"  # the AMQP front-end's view: exchanges, queues, bindings


class Api:
    def __init__(self, broker: Broker, front_ends: Sequence[FrontEnd]) -> None:
        self.broker = broker
        self.front_ends = front_ends
        self.started = time.time()
        self.version = _version()
        self.actions = Actions(broker)

    def route(self, request: Request) -> Response | Awaitable[Response]:
        url = urlsplit(request.target)
        parts = [unquote(part) for part in url.path.split("/")[2:] if part]
        if request.method == "POST":
            return self._act(parts, request)
        if request.method not in ("GET", "HEAD"):
            return responses.method_not_allowed("GET, HEAD, POST")
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        try:
            return responses.json(self._answer(parts, query))
        except (ApiError, BrokerError) as exc:
            return _refused(exc)

    async def _act(self, parts: list[str], request: Request) -> Response:
        try:
            return responses.json(await self.actions.act(parts, request))
        except (ApiError, BrokerError) as exc:
            return _refused(exc)

    def _answer(self, parts: list[str], query: dict[str, str]) -> Any:
        match parts:
            case []:
                return {"endpoints": ["/api/overview", "/api/topics", "/api/topics/{topic}", "/api/groups",
                                      "/api/groups/{group}", "/api/connections", "/api/messages?topic=&key=",
                                      "/api/messages?topic=&uniqueKey=", "/api/messages?topic=&queue=&offset=",
                                      "/api/messages/{offsetMsgId}", "/api/amqp"]}
            case ["overview"]:
                return self.overview()
            case ["topics"]:
                return self.topics()
            case ["topics", topic]:
                return self.topic(topic)
            case ["groups"]:
                return self.groups()
            case ["groups", group]:
                return self.group(group)
            case ["connections"]:
                return self.connections()
            case ["messages"]:
                return self.messages(query)
            case ["messages", msg_id]:
                return {"messages": [_message(self.broker.view_message(msg_id))]}
            case ["amqp"]:
                if AMQP_VIEW not in self.broker.views.names():
                    raise ApiError(404, "the AMQP front-end is off (amqp.enabled)")
                return self.broker.views.snapshot(AMQP_VIEW)
        raise ApiError(404, "no such resource: /api/" + "/".join(parts))

    # ------------------------------------------------------------------ resources
    def overview(self) -> dict[str, Any]:
        broker, config = self.broker, self.broker.config
        stats, figures = broker.stats(), broker.store_figures()
        return {
            "cluster": config.broker_cluster_name, "brokerName": config.broker_name,
            "brokerId": config.broker_id, "brokerRole": config.broker_role, "version": self.version,
            "uptimeSeconds": round(time.time() - self.started, 1),
            "listeners": [{"frontEnd": fe.name, "role": role, "host": host, "port": port}
                          for fe in self.front_ends for role, host, port in fe.endpoints()],
            "protocols": {fe.name: {"messagesIn": fe.traffic.messages_in, "messagesOut": fe.traffic.messages_out,
                                    "bytesIn": fe.traffic.bytes_in, "bytesOut": fe.traffic.bytes_out,
                                    "connections": fe.connections().total}
                          for fe in self.front_ends if fe.name != "http"},
            "topics": stats.topics, "queues": stats.queues, "putTps": stats.put_tps, "getTps": stats.get_tps,
            "putToday": stats.put_today, "getToday": stats.get_today,
            "replication": self.replication(),
            "store": {"commitLogMinOffset": stats.commit_log_min_offset, "commitLogMaxOffset": figures.log_end,
                      "flushBehindBytes": figures.log_end - figures.flushed,
                      "dispatchBehindBytes": figures.log_end - figures.dispatched,
                      "indexBehindBytes": max(0, figures.log_end - figures.index_built),
                      "commitLogSegments": figures.commit_log_segments,
                      "diskUsageRatio": figures.disk_usage_ratio},
        }

    def replication(self) -> dict[str, Any] | None:
        """A master's connected slaves, or a slave's master and lag; None without replication."""
        info = self.broker.ha.runtime_info()
        if "slaves" in info:
            return {"role": info["brokerRole"], "haPort": info.get("haPort"),
                    "slaves": [{"address": s["address"], "ackOffset": s["ackOffset"], "behindBytes": s["lagBytes"],
                                "inSync": s["inSync"]} for s in info["slaves"]]}  # type: ignore[attr-defined]
        if "masterOffset" in info:
            return {"role": "SLAVE", "master": info["masterAddress"], "connected": info["connected"],
                    "offset": info["slaveOffset"], "masterOffset": info["masterOffset"],
                    "behindBytes": info["lagBytes"]}
        return None

    def _queues(self) -> dict[str, list[tuple[int, int, int]]]:
        queues: dict[str, list[tuple[int, int, int]]] = {}
        for topic, queue_id, low, high in self.broker.queue_offsets():
            queues.setdefault(topic, []).append((queue_id, low, high))
        return queues

    def _writers(self, names: Sequence[str]) -> list[tuple[str, set[str]]]:
        """Each front-end's name and the topics its producers wrote to since start
        (`Traffic.topics`), without deleted topics' names (dropped here, not on the hot path)."""
        written, existing = [], set(names)
        for fe in self.front_ends:
            traffic = getattr(fe, "traffic", None)
            if traffic is not None and fe.name != "http":
                if not traffic.topics <= existing:
                    traffic.topics &= existing
                written.append((fe.name, traffic.topics))
        return written

    def topics(self) -> dict[str, Any]:
        queues = self._queues()
        names = self.broker.topic_names()
        writers = self._writers(names)
        out = []
        for name in names[:MAX_ITEMS]:
            held, config = queues.get(name, ()), self.broker.get_topic(name)
            # its configured queues, or those the store holds (a topic deleted, its queues kept)
            out.append({"topic": name, "queues": config.queue_nums if config is not None else len(held),
                        "messages": sum(high for _, _, high in held),
                        "writtenBy": [fe for fe, topics in writers if name in topics]})
        return {"topics": out, "total": len(names)}

    def topic(self, topic: str) -> dict[str, Any]:
        config = self.broker.get_topic(topic)
        if config is None:
            raise ApiError(404, f"no topic {topic!r}")
        # every queue the topic has, written to or not (the store lists those it holds)
        held = {q: (low, high) for q, low, high in self._queues().get(topic, ())}
        for q in range(config.queue_nums):
            held.setdefault(q, (0, 0))
        return {"topic": topic, "readQueueNums": config.read_queue_nums,
                "writeQueueNums": config.write_queue_nums, "perm": config.perm,
                "writtenBy": [fe for fe, topics in self._writers(self.broker.topic_names()) if topic in topics],
                "queues": [{"queueId": q, "minOffset": low, "maxOffset": high,
                            "lastStoreTimestamp": self.broker.last_store_timestamp(topic, q) if high else 0}
                           for q, (low, high) in sorted(held.items())],
                "groups": self.broker.groups_consuming(topic)}

    def _lags(self) -> dict[str, dict[str, dict[str, Any]]]:
        """group -> topic -> its lag and queues (broker offset, committed offset, lag)."""
        queues = self._queues()
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for key, committed in list(self.broker.committed_offsets().items()):
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            rows = []
            for queue_id, low, high in sorted(queues.get(topic, ())):
                offset = committed.get(queue_id, -1)
                rows.append({"queueId": queue_id, "brokerOffset": high, "consumerOffset": offset,
                             "lag": max(0, high - max(offset, low))})
            out.setdefault(group, {})[topic] = {"lag": sum(row["lag"] for row in rows), "queues": rows}
        return out

    def _members(self) -> dict[str, list[dict[str, str]]]:
        """group -> the open connections consuming for it, whatever their protocol."""
        out: dict[str, list[dict[str, str]]] = {}
        for fe in self.front_ends:
            for session in list(getattr(fe, "sessions", ())):
                for group in session.consumer_groups:
                    members = out.setdefault(group, [])
                    if len(members) < MAX_ITEMS:
                        members.append({"protocol": fe.name, "address": "%s:%d" % session.peer})
        return out

    def groups(self) -> dict[str, Any]:
        lags, members = self._lags(), self._members()
        names = sorted(set(lags) | set(self.broker.groups_table()) | set(members))
        return {"groups": [{"group": name, "lag": sum(t["lag"] for t in lags.get(name, {}).values()),
                            "topics": sorted(lags.get(name, {})), "members": _by_protocol(members.get(name, ()))}
                           for name in names[:MAX_ITEMS]],
                "total": len(names)}

    def group(self, group: str) -> dict[str, Any]:
        lags = self._lags().get(group)
        config = self.broker.find_group(group)
        members = self._members().get(group, [])
        if lags is None and config is None and not members:
            raise ApiError(404, f"no group {group!r}")
        delivering = self.broker.open_delivery_group(group)
        return {"group": group, "lag": sum(t["lag"] for t in (lags or {}).values()), "topics": lags or {},
                "members": members,
                "delivery": None if delivering is None else {
                    "consumers": delivering.consumer_count, "ready": delivering.message_count,
                    "unacked": delivering.unacked_count}}

    def connections(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fe in self.front_ends:
            sessions = list(getattr(fe, "sessions", ()))[:MAX_ITEMS]
            counts = fe.connections()
            out[fe.name] = {"total": counts.total, "producers": counts.producers, "consumers": counts.consumers,
                            "connections": [{"address": "%s:%d" % session.peer, "produces": session.produces,
                                             "consumes": session.consumes, "consumerGroups": sorted(session.consumer_groups)}
                                           for session in sessions]}
        return {"protocols": out}

    def messages(self, query: dict[str, str]) -> dict[str, Any]:
        topic = query.get("topic")
        if not topic:
            raise ApiError(400, "topic= is required (with key=, uniqueKey=, or queue= and offset=)")
        if "key" in query:
            found = self.broker.query_by_key(topic, query["key"], MAX_MESSAGES)
        elif "uniqueKey" in query:
            found = [self.broker.message_by_unique_key(topic, query["uniqueKey"])]
        elif "queue" in query and "offset" in query:
            queue_id, offset = _integer(query, "queue"), _integer(query, "offset")
            result = self.broker.get_messages(topic, queue_id, offset, 1)
            found = list(result.messages())[:1]
            if not found:
                raise ApiError(404, f"no message at {topic}:{queue_id}:{offset}")
        else:
            raise ApiError(400, "give key=, uniqueKey=, or queue= and offset=")
        return {"messages": [_message(msg) for msg in found]}


def _refused(exc: ApiError | BrokerError) -> Response:
    """The JSON error answer: ApiError's status, 404 for what does not exist, else 400."""
    if isinstance(exc, ApiError):
        return responses.json({"error": str(exc)}, exc.status)
    return responses.json({"error": str(exc)}, 404 if isinstance(exc, (MessageNotFound, TopicNotFound)) else 400)


def _by_protocol(members: Sequence[dict[str, str]]) -> dict[str, int]:
    """How many of a group's members use each protocol."""
    counts: dict[str, int] = {}
    for member in members:
        counts[member["protocol"]] = counts.get(member["protocol"], 0) + 1
    return counts


def _integer(query: dict[str, str], name: str) -> int:
    try:
        value = int(query[name])
    except ValueError:
        raise ApiError(400, f"{name}= must be an integer, got {query[name]!r}") from None
    if value < 0:
        raise ApiError(400, f"{name}= must be >= 0")
    return value


def _message(msg: MessageExt) -> dict[str, Any]:
    body = bytes(msg.body)
    preview = body[:PREVIEW_BYTES]
    try:
        text, encoding = preview.decode("utf-8"), "text"
    except UnicodeDecodeError:
        text, encoding = preview.hex(), "hex"
    host, port = msg.store_host
    try:
        msg_id: str | None = encode_offset_msg_id(host, port, msg.commit_log_offset)
    except OSError:  # not an IPv4 store host
        msg_id = None
    return {"topic": msg.topic, "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
            "commitLogOffset": msg.commit_log_offset,
            "offsetMsgId": msg_id, "uniqueKey": msg.uniq_key, "keys": msg.properties.get("KEYS"),
            "tags": msg.properties.get("TAGS"), "properties": dict(msg.properties),
            "bornTimestamp": msg.born_timestamp, "storeTimestamp": msg.store_timestamp,
            "bornHost": "%s:%d" % msg.born_host, "reconsumeTimes": msg.reconsume_times,
            "bodySize": len(body), "body": text, "bodyEncoding": encoding,
            "bodyTruncated": len(body) > PREVIEW_BYTES}
