"""The admin client: topics, groups, offsets and lookups, as mqadmin asks them.

Every method is one or a few remoting requests a RocketMQ 4.x broker or name server
answers the same way (Rocketport's or Apache's), or that a broker passes on to one of
its consumers (running info, a direct consumption). A refusal raises ClientError with
the peer's code and remark. It never sends or consumes messages itself.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import (
    BodyError,
    ClusterInfo,
    GetConsumerListByGroupResponseBody,
    MessageQueue,
    TopicList,
    TopicRouteData,
    decode_body,
)
from rocketport.protocols.remoting.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    encode_header,
)
from rocketport.protocols.remoting.messages import (
    MessageFormatError,
    decode_offset_msg_id,
    unpack_message_ext_records,
)
from rocketport.protocols.remoting.running_info import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    decode_direct_result,
    decode_running_info,
)

from .errors import ClientError
from .message import MessageExt
from .routing import MASTER_ID
from .runtime import ClientRuntime
from .transport import Tls

RETRY_PREFIX = "%RETRY%"
# 307 and 309 wait for a client behind the broker, which waits 10 s for it: mqadmin waits
# three times its usual 5 s, so the broker's answer (the client's, or its timeout) arrives
RELAYED_TIMEOUT_S = 15.0
T = TypeVar("T")


def _decode(cls: Any, body: Any, what: str) -> Any:
    try:
        return decode_body(cls, body)
    except BodyError as exc:
        raise ClientError(f"bad {what}: {exc}") from None


def _decode_with(decode: Callable[[Any], T], body: Any, what: str) -> T:
    try:
        return decode(body)
    except BodyError as exc:
        raise ClientError(f"bad {what}: {exc}") from None


class AdminClient:
    """``async with AdminClient(namesrv) as admin: await admin.create_topic("T")``"""

    def __init__(self, namesrv: str | None = None, *, timeout_s: float = 5.0,
                 credentials: tuple[str, str] | None = None, tls: Tls = None) -> None:
        self.runtime = ClientRuntime(namesrv, timeout_s=timeout_s, credentials=credentials, tls=tls)

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.runtime.close()

    async def request(self, addr: str, command: RemotingCommand,
                      ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
                      timeout_s: float | None = None) -> RemotingCommand:
        """Any request to the server at `addr`; ClientError unless the answer's code is in `ok`
        (for requests this class has no method for, as `rocketport admin` sends them)."""
        response = await self.runtime.invoke(addr, command, timeout_s)
        if response.code not in ok:
            raise ClientError(response.remark or "", response.code)
        return response

    async def _namesrv(self, code: RequestCode, fields: dict[str, str] | None = None) -> RemotingCommand:
        response = await self.runtime.routes.invoke(RemotingCommand(code, ext_fields=fields or {}))
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(response.remark or f"name server refused request {int(code)}",
                              response.code)
        return response

    async def _broker(self, addr: str, code: RequestCode, fields: dict[str, str] | None = None,
                      body: bytes = b"") -> RemotingCommand:
        return await self.request(addr, RemotingCommand(code, ext_fields=fields or {}, body=body))

    # ---------------------------------------------------------------- cluster and routes
    async def cluster_info(self) -> ClusterInfo:
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return _decode(ClusterInfo, response.body, "cluster info")

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Master addresses of every broker (of `cluster` only, when given)."""
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster, []) if cluster else list(info.broker_addr_table)
        return sorted(addr for name in names if name in info.broker_addr_table
                      if (addr := info.broker_addr_table[name].broker_addrs.get(MASTER_ID)))

    async def topic_route(self, topic: str) -> TopicRouteData:
        route = await self.runtime.routes.fetch(topic)
        if route is None:
            raise ClientError(f"topic {topic} does not exist", ResponseCode.TOPIC_NOT_EXIST)
        return route

    async def topic_list(self) -> list[str]:
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(_decode(TopicList, response.body, "topic list").topic_list)

    # ---------------------------------------------------------------- topics
    async def create_topic(self, topic: str, *, queue_nums: int = 8, perm: int = 6,
                           order: bool = False, cluster: str | None = None,
                           broker_addr: str | None = None, read_queue_nums: int | None = None,
                           write_queue_nums: int | None = None) -> list[str]:
        """Create or update `topic` on `broker_addr`, else on every master (of `cluster`),
        with `queue_nums` read and write queues unless told apart; returns the brokers."""
        addrs = [broker_addr] if broker_addr else await self.master_addrs(cluster)
        if not addrs:
            raise ClientError("the name server knows no broker")
        reads = queue_nums if read_queue_nums is None else read_queue_nums
        writes = queue_nums if write_queue_nums is None else write_queue_nums
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(reads),
                  "writeQueueNums": str(writes), "perm": str(perm),
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
                  "order": "true" if order else "false"}
        await asyncio.gather(*(self._broker(a, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
                               for a in addrs))
        self.runtime.routes.routes.pop(topic, None)
        return addrs

    async def delete_topic(self, topic: str, broker_addr: str | None = None) -> None:
        """Delete `topic` from `broker_addr`, else from every broker that serves it."""
        if broker_addr:
            addrs = {broker_addr}
        else:
            route = await self.topic_route(topic)
            addrs = {a for b in route.broker_datas if (a := b.broker_addrs.get(MASTER_ID))}
        await asyncio.gather(*(self._broker(a, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
                               for a in addrs))
        self.runtime.routes.routes.pop(topic, None)

    async def queues(self, topic: str) -> list[MessageQueue]:
        return await self.runtime.routes.subscribe_queues(topic, refresh=True)

    async def _queue_offset(self, code: RequestCode, mq: MessageQueue) -> int:
        await self.runtime.routes.route(mq.topic)
        response = await self._broker(self.runtime.routes.broker_addr(mq.broker_name), code,
                                      {"topic": mq.topic, "queueId": str(mq.queue_id)})
        return int(response.ext_fields.get("offset", 0))

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._queue_offset(RequestCode.GET_MIN_OFFSET, mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset the next message of `mq` will get."""
        return await self._queue_offset(RequestCode.GET_MAX_OFFSET, mq)

    # ---------------------------------------------------------------- groups and offsets
    async def create_group(self, group: str, *, retry_max_times: int = 16, retry_queue_nums: int = 1,
                           broadcast: bool = True, consume_enable: bool = True,
                           consume_from_min_enable: bool = True, broker_id: int = 0,
                           which_broker_when_consume_slowly: int = 1,
                           notify_consumer_ids_changed_enable: bool = True, cluster: str | None = None,
                           broker_addr: str | None = None) -> list[str]:
        """Create or update a subscription group on `broker_addr`, else on every master
        (the settings are RocketMQ's SubscriptionGroupConfig, with its defaults)."""
        body = orjson.dumps({"groupName": group, "consumeEnable": consume_enable,
                             "consumeFromMinEnable": consume_from_min_enable,
                             "consumeBroadcastEnable": broadcast, "retryQueueNums": retry_queue_nums,
                             "retryMaxTimes": retry_max_times, "brokerId": broker_id,
                             "whichBrokerWhenConsumeSlowly": which_broker_when_consume_slowly,
                             "notifyConsumerIdsChangedEnable": notify_consumer_ids_changed_enable})
        addrs = [broker_addr] if broker_addr else await self.master_addrs(cluster)
        await asyncio.gather(*(self._broker(a, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                            body=body) for a in addrs))
        return addrs

    async def delete_group(self, group: str, cluster: str | None = None,
                           broker_addr: str | None = None) -> None:
        """Delete a subscription group (and its offsets) from `broker_addr`, else every master."""
        addrs = [broker_addr] if broker_addr else await self.master_addrs(cluster)
        await asyncio.gather(*(self._broker(a, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                            {"groupName": group}) for a in addrs))

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        """Client ids of the group's online consumers, as the brokers of `topic` know them."""
        route = await self.topic_route(topic)
        ids: set[str] = set()
        for broker in route.broker_datas:
            addr = broker.broker_addrs.get(MASTER_ID)
            if not addr:
                continue
            response = await self.runtime.invoke(addr, RemotingCommand(
                RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": group}))
            if response.code == ResponseCode.SUCCESS:
                ids.update(_decode(GetConsumerListByGroupResponseBody, response.body,
                                   "consumer list").consumer_id_list)
        return sorted(ids)

    async def committed_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset of `mq`; -1 when it has none."""
        await self.runtime.routes.route(mq.topic)
        response = await self.runtime.invoke(self.runtime.routes.broker_addr(mq.broker_name),
                                             RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET,
                                                             ext_fields={"consumerGroup": group,
                                                                         "topic": mq.topic,
                                                                         "queueId": str(mq.queue_id)}))
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(response.remark or "offset query refused", response.code)
        return int(response.ext_fields.get("offset", -1))

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_s: float) -> None:
        """Move the group's offsets of `topic` to the first message stored at or after
        `timestamp_s` (epoch seconds) on every broker of the topic."""
        route = await self.topic_route(topic)
        fields = {"topic": topic, "group": group, "timestamp": str(round(timestamp_s * 1000)),
                  "isForce": "true"}
        await asyncio.gather(*(self._broker(a, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
                               for b in route.broker_datas
                               if (a := b.broker_addrs.get(MASTER_ID))))

    # ---------------------------------------------------------------- consumers, through a broker
    async def group_broker(self, group: str) -> str:
        """A broker that knows the group's clients: the first master of `%RETRY%group`'s
        route (every consumer of a clustering group heartbeats to it), as mqadmin picks one."""
        route = await self.topic_route(RETRY_PREFIX + group)
        for broker in route.broker_datas:
            addr = broker.broker_addrs.get(MASTER_ID)
            if addr:
                return addr
        raise ClientError(f"no broker serves {RETRY_PREFIX}{group}", ResponseCode.TOPIC_NOT_EXIST)

    async def consumer_running_info(self, group: str, client_id: str, *, jstack: bool = False,
                                    broker_addr: str | None = None) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (307): what the consumer `client_id` of `group` holds
        and how it is set, asked of `broker_addr` (else `group_broker`), which passes the
        request on to the client; with `jstack`, its tasks' stacks too."""
        addr = broker_addr or await self.group_broker(group)
        response = await self.request(addr, RemotingCommand(
            RequestCode.GET_CONSUMER_RUNNING_INFO, ext_fields=encode_header(GetConsumerRunningInfoRequestHeader(
                group, client_id, jstack))), timeout_s=RELAYED_TIMEOUT_S)
        return _decode_with(decode_running_info, response.body, "consumer running info")

    async def consume_message_directly(self, group: str, client_id: str,
                                       offset_msg_id: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (309): the consumer `client_id` of `group` consumes the
        message `offset_msg_id` names once with its listener (no offset moves); the
        listener's verdict. Asked of the broker that stores the message."""
        try:
            host, port, _ = decode_offset_msg_id(offset_msg_id)
        except MessageFormatError as exc:
            raise ClientError(str(exc)) from None
        response = await self.request(f"{host}:{port}", RemotingCommand(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, ext_fields=encode_header(
                ConsumeMessageDirectlyResultRequestHeader(group, client_id, offset_msg_id))),
            timeout_s=RELAYED_TIMEOUT_S)
        return _decode_with(decode_direct_result, response.body, "direct consumption result")

    # ---------------------------------------------------------------- messages
    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset message id (SendResult.offset_msg_id) names."""
        try:
            host, port, offset = decode_offset_msg_id(offset_msg_id)
        except MessageFormatError as exc:
            raise ClientError(str(exc)) from None
        addr = f"{host}:{port}"
        response = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        names = {a: n for n, a in self.runtime.routes.brokers.items()}
        return self._messages(response, names.get(addr, ""))[0]

    async def query_by_key(self, topic: str, key: str, *, max_num: int = 32,
                           begin_s: float = 0, end_s: float | None = None) -> list[MessageExt]:
        """Messages of `topic` whose KEYS hold `key`, from every broker of the topic."""
        route = await self.topic_route(topic)
        fields = {"topic": topic, "key": key, "maxNum": str(max_num),
                  "beginTimestamp": str(int(begin_s * 1000)),
                  "endTimestamp": str(int((end_s or time.time() + 60) * 1000))}
        found: list[MessageExt] = []
        for broker in route.broker_datas:
            addr = broker.broker_addrs.get(MASTER_ID)
            if not addr:
                continue
            response = await self.runtime.invoke(addr, RemotingCommand(
                RequestCode.QUERY_MESSAGE, ext_fields=fields))
            if response.code == ResponseCode.SUCCESS:
                found += self._messages(response, broker.broker_name)
            elif response.code != ResponseCode.QUERY_NOT_FOUND:
                raise ClientError(response.remark or "query refused", response.code)
        return found

    @staticmethod
    def _messages(response: RemotingCommand, broker_name: str) -> list[MessageExt]:
        try:
            return [MessageExt(raw, broker_name) for raw in unpack_message_ext_records(response.body)]
        except (MessageFormatError, zlib.error) as exc:
            raise ClientError(f"bad message records: {exc}") from None
