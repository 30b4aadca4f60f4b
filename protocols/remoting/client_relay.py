"""Admin requests the broker passes on to one consumer and whose answer it passes back.

mqadmin cannot reach a client: it asks a broker the client is connected to, which sends
the request over the client's own connection (the channel the consumer manager keeps
from its heartbeats) and returns the client's answer, as RocketMQ's AdminBrokerProcessor
does: GET_CONSUMER_RUNNING_INFO (307, mqadmin consumerStatus and consumerProgress -s)
and CONSUME_MESSAGE_DIRECTLY (309, queryMsgByUniqueKey -g -d), for which the broker first
reads the message the offset message id names and sends its record along. A client that
is not connected answers SYSTEM_ERROR, one that does not answer within
`CALL_CLIENT_TIMEOUT_S` CONSUME_MSG_TIMEOUT, each with RocketMQ's remark: never a hang.
It never interprets the client's answer and never touches the store or a socket itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rocketport.core.broker import Broker

from .codes import RequestCode, ResponseCode
from .command import RemotingCommand, make_response
from .headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    decode_header,
)
from .messages import decode_offset_msg_id
from .records import message_ext_record
from .session import RemotingSession

CALL_CLIENT_TIMEOUT_S = 10.0  # RocketMQ's Broker2Client.callClient waits as long

Handler = Callable[[object, RemotingCommand], Awaitable[RemotingCommand]]


class ClientRelay:
    """307 and 309, passed on to the named client of the named group."""

    def __init__(self, broker: Broker, call_timeout_s: float = CALL_CLIENT_TIMEOUT_S) -> None:
        self.broker = broker
        self.call_timeout_s = call_timeout_s

    def routes(self) -> dict[int, Handler]:
        return {RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly}

    async def get_consumer_running_info(self, session: object, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerRunningInfoRequestHeader, request.ext_fields)
        return await self._call_consumer(request, h.consumer_group, h.client_id,
                                         dict(request.ext_fields), b"")

    async def consume_message_directly(self, session: object, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ConsumeMessageDirectlyResultRequestHeader, request.ext_fields)
        _, _, offset = decode_offset_msg_id(h.msg_id)  # ValueError: answered as a bad request
        record = message_ext_record(self.broker.message_by_offset(offset))
        fields = {**request.ext_fields, "brokerName": self.broker.config.broker_name}
        return await self._call_consumer(request, h.consumer_group, h.client_id, fields, record)

    async def _call_consumer(self, request: RemotingCommand, group: str, client_id: str,
                             fields: dict[str, str], body: bytes) -> RemotingCommand:
        info = self.broker.consumer_manager.group_info(group)
        client = info.clients.get(client_id) if info is not None else None
        if client is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"The Consumer <{group}> <{client_id}> not online")
        channel = client.channel
        if not isinstance(channel, RemotingSession):  # a Kafka, STOMP or AMQP member
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"The Consumer <{group}> <{client_id}> is not a RocketMQ remoting "
                                 f"client: it cannot answer request {request.code}")
        try:
            answer = await channel.invoke(RemotingCommand(code=request.code, ext_fields=fields, body=body),
                                          self.call_timeout_s)
        except TimeoutError as exc:
            return make_response(request, ResponseCode.CONSUME_MSG_TIMEOUT,
                                 f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except ConnectionError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return make_response(request, answer.code, answer.remark, dict(answer.ext_fields), answer.body)
