"""ACL for the remoting front-end (``aclEnable``): RocketMQ 4.x's request signing.

Clients sign each request with HMAC-SHA1 over the values of its extFields sorted by key
(Signature itself left out) followed by the body, and send AccessKey and Signature as
extFields (AclClientRPCHook in Java; the C++ client adds OnsChannel, which is signed like
any other field). Which topics and groups a request needs follows RocketMQ's
PlainAccessValidator, plus batch sends and offset queries, which it leaves unchecked. A
refused request is answered SYSTEM_ERROR with an "AclException: ..." remark, as RocketMQ's
broker answers, and nothing is done.
"""

from __future__ import annotations

import logging
from typing import Any

from rocketport.core.auth.plain_acl import (
    PUB,
    SUB,
    AccessRequest,
    AclError,
    PlainAcl,
    group_resource,
)

from . import bodies
from .acl_sign import ACCESS_KEY, SIGNATURE, signed_content
from .codes import RequestCode, ResponseCode
from .command import FLAG_RESPONSE, Buffer, RemotingCommand
from .session import FastLane, RemotingSession, RequestHandler

log = logging.getLogger(__name__)

_ADMIN_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                          RequestCode.DELETE_TOPIC_IN_BROKER,
                          RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          RequestCode.DELETE_SUBSCRIPTIONGROUP})
_RETRY_PREFIX = "%RETRY%"


def needed_resources(code: int, ext: dict[str, str], body: Buffer) -> dict[str, int]:
    """Topic (and %RETRY%group) -> the permission the request needs."""
    out: dict[str, int] = {}

    def send(topic: str | None, group: str | None) -> None:
        if topic is not None and topic.startswith(_RETRY_PREFIX):
            out[group_resource(group or "")] = SUB  # a retry is the group's business
        elif topic is not None:
            out[topic] = PUB

    if code == RequestCode.SEND_MESSAGE:
        send(ext.get("topic"), ext.get("producerGroup"))
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        send(ext.get("b", ext.get("topic")), ext.get("a", ext.get("producerGroup")))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        out[group_resource(ext.get("group", ""))] = SUB
    elif code == RequestCode.PULL_MESSAGE:
        out[ext.get("topic", "")] = SUB
        out[group_resource(ext.get("consumerGroup", ""))] = SUB
    elif code == RequestCode.QUERY_MESSAGE:
        out[ext.get("topic", "")] = SUB
    elif code == RequestCode.HEART_BEAT:
        data = bodies.decode_body(bodies.HeartbeatData, body)
        for consumer in data.consumer_data_set:
            out[group_resource(consumer.group_name)] = SUB
            for sub in consumer.subscription_data_set:
                if not sub.topic.startswith(_RETRY_PREFIX):
                    out[sub.topic] = SUB
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        if ext.get("consumerGroup"):
            out[group_resource(ext["consumerGroup"])] = SUB
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        out[group_resource(ext.get("consumerGroup", ""))] = SUB
        out[ext.get("topic", "")] = SUB
    return out


class AclCheckedHandlers:
    """A RequestHandler that validates each request before the broker's handlers see it.

    The fast paths stay: a request the inner handler's lane or ``handle_now`` would take is
    checked from its loaded JSON header first. Only a request that passes goes that way;
    any other (refused, or with non-string extFields) becomes a command and is checked,
    and answered when refused, by ``handle``.
    """

    def __init__(self, inner: RequestHandler, acl: PlainAcl) -> None:
        self.inner = inner
        self.acl = acl
        self.lane = _CheckedLane(inner.lane, self._allowed) if inner.lane is not None else None

    def _check(self, peer: tuple[str, int], code: int, ext: dict[str, str], body: Buffer) -> None:
        self.acl.validate(AccessRequest(
            peer[0], ext.get(ACCESS_KEY), ext.get(SIGNATURE), signed_content(ext, body),
            needed_resources(code, ext, body), code in _ADMIN_CODES))

    def _allowed(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> bool:
        try:  # non-string extFields raise here too: the general path coerces them
            self._check(session.peer, header.get("code"), header.get("extFields") or {}, body)
        except Exception:  # refused or unreadable: the general path answers why
            return False
        return True

    def handle_now(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> list[Buffer] | None:
        # the broker's handle_now answers pulls only: checking anything else here would
        # check it twice (a heartbeat's body decoded twice)
        if header.get("code") != RequestCode.PULL_MESSAGE or not self._allowed(session, header, body):
            return None
        return self.inner.handle_now(session, header, body)

    async def handle(self, session: RemotingSession, request: RemotingCommand) -> RemotingCommand | None:
        try:
            self._check(session.peer, request.code, request.ext_fields, request.body)
        except AclError as exc:
            log.info("remoting %s:%d: code %d refused: %s", *session.peer, request.code, exc)
            return RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=request.opaque,
                                   flag=FLAG_RESPONSE, remark=f"AclException: {exc}")
        except Exception as exc:  # e.g. a heartbeat body that does not decode
            return RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=request.opaque,
                                   flag=FLAG_RESPONSE, remark=f"AclException: cannot read the request: {exc}")
        return await self.inner.handle(session, request)

    def session_closed(self, session: RemotingSession) -> None:
        self.inner.session_closed(session)


class _CheckedLane:
    """The inner lane, taking only requests the ACL allows."""

    def __init__(self, inner: FastLane, allowed) -> None:
        self.inner = inner
        self.allowed = allowed

    def take(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> object | None:
        item = self.inner.take(session, header, body)
        if item is None or not self.allowed(session, header, body):
            return None
        return item

    def answer(self, session: RemotingSession, items: list[Any]) -> list[Buffer]:
        return self.inner.answer(session, items)
