"""ACL for the remoting front-end (``aclEnable``): RocketMQ 4.x's request signing.

Clients sign each request with HMAC-SHA1 over the values of its extFields sorted by key
(Signature itself left out) followed by the body, and send AccessKey and Signature as
extFields (AclClientRPCHook in Java; the C++ client adds OnsChannel, which is signed like
any other field). Which topics and groups a request needs follows RocketMQ's
PlainAccessValidator, plus batch sends and offset queries, which it leaves unchecked. A
refused request is answered SYSTEM_ERROR with an "AclException: ..." remark, as RocketMQ's
broker answers, and nothing is done. Over mutual TLS an unsigned request (no AccessKey) is
the account the client certificate's CN names, with its permissions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rocketport.core.auth.plain_acl import (
    PUB,
    SUB,
    AccessRequest,
    AclError,
    PlainAcl,
    group_resource,
)

from ..tls import certificate_name
from . import bodies
from .acl_sign import ACCESS_KEY, SIGNATURE, signed_content
from .codes import RequestCode, ResponseCode
from .command import FLAG_RESPONSE, Buffer, RemotingCommand
from .session import FastLane, RemotingSession, RequestHandler

log = logging.getLogger(__name__)

_RETRY_PREFIX = "%RETRY%"

Resources = dict[str, int]  # topic (or %RETRY%group) -> the permission a request needs
_Rule = Callable[[dict[str, str], Buffer], Resources]


def _signed_only(ext: dict[str, str], body: Buffer) -> Resources:
    """A valid signature is enough (RocketMQ checks no resource for these either)."""
    return {}


def _sent_to(topic: str | None, group: str | None) -> Resources:
    if topic is not None and topic.startswith(_RETRY_PREFIX):
        return {group_resource(group or ""): SUB}  # a retry is the group's business
    return {topic: PUB} if topic is not None else {}


def _topic(ext: dict[str, str], body: Buffer) -> Resources:
    """Reading a topic (a retry topic's name is its group's resource name)."""
    return {ext.get("topic", ""): SUB}


def _group(field: str) -> _Rule:
    return lambda ext, body: {group_resource(ext.get(field, "")): SUB}


def _topic_and_group(ext: dict[str, str], body: Buffer) -> Resources:
    return {**_topic(ext, body), group_resource(ext.get("consumerGroup", "")): SUB}


def _heartbeat(ext: dict[str, str], body: Buffer) -> Resources:
    out: Resources = {}
    for consumer in bodies.decode_body(bodies.HeartbeatData, body).consumer_data_set:
        out[group_resource(consumer.group_name)] = SUB
        for sub in consumer.subscription_data_set:
            if not sub.topic.startswith(_RETRY_PREFIX):
                out[sub.topic] = SUB
    return out


def _locks(ext: dict[str, str], body: Buffer) -> Resources:
    return {group_resource(bodies.decode_body(bodies.LockBatchRequestBody, body).consumer_group): SUB}


def _optional_group(ext: dict[str, str], body: Buffer) -> Resources:
    group = ext.get("consumerGroup")
    return {group_resource(group): SUB} if group else {}


_ADMIN = object()  # the account must be an admin; no resource beyond that

# Every code the broker serves has a rule here; a code without one is refused under ACL
# (deny by default), so a request code added to the router is closed until given a rule.
# Resources follow RocketMQ's PlainAccessValidator, plus batch sends and the offset and
# timestamp queries on a topic (which it leaves unchecked).
RULES: dict[int, _Rule | object] = {
    RequestCode.SEND_MESSAGE: lambda ext, body: _sent_to(ext.get("topic"), ext.get("producerGroup")),
    RequestCode.SEND_MESSAGE_V2: lambda ext, body: _sent_to(ext.get("b", ext.get("topic")),
                                                            ext.get("a", ext.get("producerGroup"))),
    RequestCode.SEND_BATCH_MESSAGE: lambda ext, body: _sent_to(ext.get("b", ext.get("topic")),
                                                               ext.get("a", ext.get("producerGroup"))),
    RequestCode.CONSUMER_SEND_MSG_BACK: _group("group"),
    RequestCode.PULL_MESSAGE: _topic_and_group,
    RequestCode.QUERY_CONSUMER_OFFSET: _topic_and_group,
    RequestCode.UPDATE_CONSUMER_OFFSET: _topic_and_group,
    RequestCode.QUERY_MESSAGE: _topic,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _topic,
    RequestCode.GET_MAX_OFFSET: _topic,
    RequestCode.GET_MIN_OFFSET: _topic,
    RequestCode.GET_EARLIEST_MSG_STORETIME: _topic,
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _optional_group,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _optional_group,
    RequestCode.LOCK_BATCH_MQ: _locks,
    RequestCode.UNLOCK_BATCH_MQ: _locks,
    RequestCode.END_TRANSACTION: _signed_only,
    RequestCode.VIEW_MESSAGE_BY_ID: _signed_only,
    RequestCode.GET_ALL_TOPIC_CONFIG: _signed_only,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _signed_only,
    RequestCode.GET_ALL_CONSUMER_OFFSET: _signed_only,
    RequestCode.GET_ALL_DELAY_OFFSET: _signed_only,
    RequestCode.GET_BROKER_RUNTIME_INFO: _signed_only,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: _signed_only,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: _signed_only,
    RequestCode.GET_TOPIC_STATS_INFO: _signed_only,
    RequestCode.GET_CONSUME_STATS: _signed_only,
    RequestCode.GET_BROKER_CONSUME_STATS: _signed_only,
    RequestCode.VIEW_BROKER_STATS_DATA: _signed_only,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _signed_only,
    RequestCode.GET_BROKER_CONFIG: _signed_only,
    RequestCode.GET_FRONTEND_VIEW: _signed_only,
    RequestCode.GET_CONSUMER_RUNNING_INFO: _signed_only,  # relayed to a client, as RocketMQ: signed only
    RequestCode.CONSUME_MESSAGE_DIRECTLY: _signed_only,
    RequestCode.UPDATE_AND_CREATE_TOPIC: _ADMIN,
    RequestCode.DELETE_TOPIC_IN_BROKER: _ADMIN,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _ADMIN,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: _ADMIN,
    RequestCode.UPDATE_BROKER_CONFIG: _ADMIN,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: _ADMIN,
    RequestCode.CLONE_GROUP_OFFSET: _ADMIN,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: _ADMIN,
    RequestCode.CLEAN_UNUSED_TOPIC: _ADMIN,
    RequestCode.DELETE_EXPIRED_COMMITLOG: _ADMIN,
}


def needed_resources(code: int, ext: dict[str, str], body: Buffer) -> tuple[Resources, bool]:
    """(resources -> permission, needs admin) for a request; AclError for a code with no rule."""
    rule = RULES.get(code)
    if rule is None:
        raise AclError(f"request code {code} has no access rule: refused")
    if rule is _ADMIN:
        return {}, True
    return rule(ext, body), False  # type: ignore[operator]


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

    def _check(self, session: RemotingSession, code: int, ext: dict[str, str], body: Buffer) -> None:
        resources, needs_admin = needed_resources(code, ext, body)
        self.acl.validate(AccessRequest(
            session.peer[0], ext.get(ACCESS_KEY), ext.get(SIGNATURE), signed_content(ext, body),
            resources, needs_admin, certificate_name(session.transport)))

    def _allowed(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> bool:
        try:  # non-string extFields raise here too: the general path coerces them
            self._check(session, header.get("code"), header.get("extFields") or {}, body)
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
            self._check(session, request.code, request.ext_fields, request.body)
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
