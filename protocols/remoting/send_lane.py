"""The send lane: plain single sends served from their loaded JSON header, a read at a time.

A producer pipelining single sends (SEND_MESSAGE_V2, or SEND_MESSAGE with long keys) is
the commonest busy connection, and each send's bookkeeping used to cost more than its
store append: a checked command, a typed header, a coroutine or its substitute, one
append and one dispatch per message. The session offers every JSON request to `take`,
which accepts only a well-formed send the broker can store as it is (`Broker.accept_now`:
an existing writable topic, no transaction or delay, ASYNC_FLUSH); `answer` then stores all
the sends one read delivered with one append (`Broker.put_now`) and renders each response
from a template. Anything else (oneway, odd values, a topic to create, SYNC_FLUSH...) is
declined and served by the handlers as before, which also name what was wrong.
"""

from __future__ import annotations

import logging
from binascii import hexlify
from typing import Any

from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.message import (
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    property_bytes,
    property_needles,
)
from rocketport.core.store.message_store import EncodedPut

from .codes import RequestCode, ResponseCode
from .command import FLAG_RESPONSE, Buffer, RemotingCommand
from .errors import code_for
from .frame import JsonFrameTemplate, encode_command, json_text
from .headers import SEND_MESSAGE_V2_KEYS

log = logging.getLogger(__name__)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# The extFields keys a send uses, by request code: V2's one-letter keys, V1's names.
_V2 = "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"
_KEYS = {
    RequestCode.SEND_MESSAGE_V2: _V2,
    RequestCode.SEND_MESSAGE: tuple(SEND_MESSAGE_V2_KEYS[key] for key in _V2),
}
# A send response's extFields: these two fixed, the others per message (in this order).
SEND_FIXED = {PROPERTY_MSG_REGION: "DefaultRegion", PROPERTY_TRACE_SWITCH: "true"}
SEND_OK = JsonFrameTemplate(ResponseCode.SUCCESS, {
    "msgId": bytes, "queueId": int, "queueOffset": int, "transactionId": bytes, **SEND_FIXED})
_UNIQ_KEY = property_needles(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

# What `take` hands to `answer`: the message as the store takes it, opaque, version.
Taken = tuple[EncodedPut, int, int]


class SendLane:
    """The broker handlers' `FastLane` (see `session.FastLane`)."""

    __slots__ = ("_broker",)

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def take(self, session: Any, header: dict[str, Any], body: Buffer) -> Taken | None:
        get = header.get
        keys = _KEYS.get(get("code"))  # type: ignore[arg-type]
        if keys is None or get("flag", 0) != 0:  # a response, or oneway: not the lane's
            return None
        opaque = get("opaque", 0)
        version = get("version", 0)
        ext = get("extFields")
        if (type(opaque) is not int or type(version) is not int or type(ext) is not dict
                or not _INT32_MIN <= opaque <= _INT32_MAX or not _INT32_MIN <= version <= _INT32_MAX):
            return None
        (k_group, k_topic, k_default, k_nums, k_queue, k_sys_flag, k_born, k_flag, k_props,
         k_reconsume, k_unit, k_max_reconsume, k_batch) = keys
        get = ext.get
        topic, queue, sys_flag, born, flag = get(k_topic), get(k_queue), get(k_sys_flag), get(k_born), get(k_flag)
        properties, reconsume, nums = get(k_props), get(k_reconsume), get(k_nums)
        unit, batch = get(k_unit), get(k_batch)
        # Only what the handlers' decoder takes as it is: whatever it would coerce, refuse
        # or use (a batch, maxReconsumeTimes) goes to it.
        if (type(topic) is not str or type(queue) is not str or type(sys_flag) is not str
                or type(born) is not str or type(flag) is not str or type(nums) is not str
                or type(get(k_group)) is not str or type(get(k_default)) is not str
                or (properties is not None and type(properties) is not str)
                or (reconsume is not None and type(reconsume) is not str)
                or (unit is not None and unit != "false") or (batch is not None and batch != "false")
                or get(k_max_reconsume) is not None):
            return None
        try:
            queue_id, sys_flag, born, flag = int(queue), int(sys_flag), int(born), int(flag)
            reconsume = int(reconsume) if reconsume else 0
            int(nums)
        except ValueError:
            return None
        if not (_INT32_MIN <= queue_id <= _INT32_MAX and _INT32_MIN <= sys_flag <= _INT32_MAX
                and _INT32_MIN <= flag <= _INT32_MAX and _INT32_MIN <= reconsume <= _INT32_MAX
                and _INT64_MIN <= born <= _INT64_MAX):
            return None
        props = properties.encode("utf-8", "surrogateescape") if properties else b""
        try:
            accepted = self._broker.accept_now(topic, queue_id, props, sys_flag)
        except BrokerError:
            return None  # refused (an illegal queue...): the handlers answer with the reason
        if accepted is None:
            return None
        queue_id, tags_code = accepted
        return ((topic, queue_id, body, props, tags_code, flag, sys_flag, born, session.peer,
                 reconsume), opaque, version)

    def answer(self, session: Any, taken: list[Taken]) -> list[Buffer]:
        try:
            results: list[Any] = self._broker.put_now([item for item, _, _ in taken])
        except Exception as exc:  # the store refused them all (StoreUnavailable), or a bug
            if not isinstance(exc, BrokerError):
                log.exception("send lane failed for %d sends from %s:%d", len(taken), *session.peer)
            results = [exc] * len(taken)
        store_host = self._broker.store.store_host
        frames: list[Buffer] = []
        for (item, opaque, version), result in zip(taken, results):
            if type(result) is tuple:
                queue_offset, phys = result
                props = item[3]
                uniq = property_bytes(props, _UNIQ_KEY) if props else None
                frames.append(SEND_OK.frame(
                    opaque, version, hexlify(store_host + phys.to_bytes(8, "big")).upper(),
                    item[1], queue_offset, json_text(uniq) if uniq else b""))
            else:
                code, remark = code_for(result)
                frames += encode_command(RemotingCommand(
                    code=code, version=version, opaque=opaque, flag=FLAG_RESPONSE, remark=remark))
        return frames
