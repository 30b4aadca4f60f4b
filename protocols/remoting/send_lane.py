"""The send lane: plain single sends served from their loaded JSON header, a read at a time.

A producer pipelining single sends (SEND_MESSAGE_V2, or SEND_MESSAGE with long keys) is
the commonest busy connection, and each send's bookkeeping used to cost more than its
store append: a checked command, a typed header, a coroutine or its substitute, one
append and one dispatch per message. The session offers every JSON request to `take`,
which accepts only a well-formed send the broker can store as it is (`Broker.accept_now`:
an existing writable topic, no transaction or delay) as a `PlainSend`;
`answer` then stores all the sends one read delivered with one append (`Broker.put_plain`,
the core's plain-send lane) and renders each response from a template. Under SYNC_FLUSH or
SYNC_MASTER the responses go out once the core's `durable` future resolves (one fsync and
one slave acknowledgement for the read), with RocketMQ's FLUSH_SLAVE_TIMEOUT /
SLAVE_NOT_AVAILABLE and the send's header when no slave acknowledged them. Anything else
(oneway, odd values, a topic to create, dispatchAfterFlush...) is declined and served by
the handlers as before, which also name what was wrong.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from rocketport.common.message import (
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    UNIQ_KEY_NEEDLES,
    property_bytes,
)
from rocketport.common.message_id import offset_msg_id_template
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError, FlushSlaveTimeout, ReplicaNotInSync
from rocketport.core.facade.types import PlainSend

from ..frontend import Traffic
from .codes import RequestCode, ResponseCode
from .command import FLAG_RESPONSE, Buffer, RemotingCommand
from .errors import code_for
from .frame import JsonFrameTemplate, encode_command, json_text
from .headers import SEND_MESSAGE_V2_KEYS

log = logging.getLogger(__name__)

# Packing checks the ranges at once: opaque, version, queue id, sys flag, flag and
# reconsume times are i32 on the wire or in the record, the born timestamp i64.
_RANGES = struct.Struct(">iiiiiiq")

# The extFields keys a send uses, by request code: V2's one-letter keys, V1's names.
_V2 = "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"
_KEYS = {
    RequestCode.SEND_MESSAGE_V2: _V2,
    RequestCode.SEND_MESSAGE: tuple(SEND_MESSAGE_V2_KEYS[key] for key in _V2),
}
# A send response's extFields: these two fixed, the others per message (in this order).
SEND_FIXED = {PROPERTY_MSG_REGION: "DefaultRegion", PROPERTY_TRACE_SWITCH: "true"}
_SEND_SLOTS: dict[str, str | type] = {
    "msgId": bytes, "queueId": int, "queueOffset": int, "transactionId": bytes, **SEND_FIXED}
SEND_OK = JsonFrameTemplate(ResponseCode.SUCCESS, _SEND_SLOTS)
# SYNC_MASTER, stored but not acknowledged: the send's header all the same (SendMessageProcessor)
SEND_UNREPLICATED = {ResponseCode.FLUSH_SLAVE_TIMEOUT: JsonFrameTemplate(ResponseCode.FLUSH_SLAVE_TIMEOUT, _SEND_SLOTS),
                     ResponseCode.SLAVE_NOT_AVAILABLE: JsonFrameTemplate(ResponseCode.SLAVE_NOT_AVAILABLE, _SEND_SLOTS)}

# What `take` hands to `answer`: the accepted send, opaque, version.
Taken = tuple[PlainSend, int, int]


class SendLane:
    """The broker handlers' `FastLane` (see `session.FastLane`)."""

    __slots__ = ("_broker", "traffic")

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.traffic = Traffic()  # the front-end's, once it has one (/metrics)

    def take(self, session: Any, header: dict[str, Any], body: Buffer) -> Taken | None:
        # Kept flat and terse on purpose: this runs once per send, at ~30 ns an opcode.
        get = header.get
        keys = _KEYS.get(get("code"))  # type: ignore[arg-type]
        opaque = get("opaque", 0)
        version = get("version", 0)
        if (keys is None or get("flag", 0) != 0  # a response, or oneway: not the lane's
                or type(opaque) is not int or type(version) is not int):
            return None
        group, topic, default, nums, queue, sys_flag, born, flag, props, reconsume, unit, limit, batch = keys
        try:
            ext = header["extFields"]
            topic, queue, sys_flag, born, flag = ext[topic], ext[queue], ext[sys_flag], ext[born], ext[flag]
            properties = ext.get(props) or ""
            reconsume = ext.get(reconsume) or "0"
            # What the handlers' decoder would coerce, refuse or use (a batch,
            # maxReconsumeTimes) goes to it: every field a string (join raises
            # TypeError otherwise), no batch, no unit mode, no limit.
            "".join((ext[group], ext[default], ext[nums], topic, queue, sys_flag, born, flag,
                     properties, reconsume))
            if ext.get(batch, "false") != "false" or ext.get(unit, "false") != "false" or limit in ext:
                return None
            queue_id, sys_flag, born, flag, reconsume = int(queue), int(sys_flag), int(born), int(flag), int(reconsume)
            int(ext[nums])
            _RANGES.pack(opaque, version, queue_id, sys_flag, flag, reconsume, born)
            props = properties.encode("utf-8", "surrogateescape")
            if len(body) > self._broker.config.max_message_size:  # (the store takes STOMP's larger)
                return None  # the handlers refuse it with RocketMQ's limit
            accepted = self._broker.accept_now(topic, queue_id, props, sys_flag, answers_after_durable=True)
        except (KeyError, TypeError, ValueError, struct.error, BrokerError):
            return None  # the handlers answer it, naming what is wrong
        if accepted is None:
            return None
        return (PlainSend(topic, accepted[0], props, [body], session.peer, accepted[1], flag, sys_flag,
                          born, reconsume), opaque, version)

    def answer(self, session: Any, taken: list[Taken]) -> list[Buffer]:
        durable = None
        try:
            put = self._broker.put_plain([send for send, _, _ in taken], durable=True)
            results: list[Any] = put.stored
            durable = put.durable
        except Exception as exc:  # a bug: the lane answers the store's refusals per send
            log.exception("send lane failed for %d sends from %s:%d", len(taken), *session.peer)
            results = [exc] * len(taken)
        stored = size = 0
        written = self.traffic.topics  # one addition a request, as the handlers'
        for (send, _, _), result in zip(taken, results):
            if type(result) is tuple:
                stored += 1
                size += len(send.bodies[0])
                written.add(send.topic)
        if stored:
            session.produces = True
            traffic = self.traffic
            traffic.messages_in += stored
            traffic.bytes_in += size
            if traffic.sizes is not None:
                traffic.sizes.observe_batch(size, stored)
        if durable is None:
            return self._frames(taken, results, SEND_OK)
        durable.add_done_callback(lambda done: session.emit(self._after(done, taken, results)))
        return []

    def _after(self, done: Any, taken: list[Taken], results: list[Any]) -> list[Buffer]:
        """The responses once the sends are durable: SEND_OK, or when no slave acknowledged
        them RocketMQ's code with the send's header, or the flush's error for each."""
        exc = None if done.cancelled() else done.exception()
        if exc is None and not done.cancelled():
            return self._frames(taken, results, SEND_OK)
        if isinstance(exc, ReplicaNotInSync):
            code = (ResponseCode.FLUSH_SLAVE_TIMEOUT if isinstance(exc, FlushSlaveTimeout)
                    else ResponseCode.SLAVE_NOT_AVAILABLE)
            return self._frames(taken, results, SEND_UNREPLICATED[code])
        error = exc if exc is not None else BrokerError("the flush was cancelled")
        return self._frames(taken, [r if type(r) is not tuple else error for r in results], SEND_OK)

    def _frames(self, taken: list[Taken], results: list[Any], template: JsonFrameTemplate) -> list[Buffer]:
        msg_id = offset_msg_id_template(self._broker.store_host)
        frames: list[Buffer] = []
        for (send, opaque, version), result in zip(taken, results):
            if type(result) is tuple:
                queue_offset, phys = result
                props = send.properties
                uniq = property_bytes(props, UNIQ_KEY_NEEDLES) if props else None
                frames.append(template.frame(opaque, version, msg_id % phys, send.queue_id, queue_offset,
                                             json_text(uniq) if uniq else b""))
            else:
                code, remark = code_for(result)
                frames += encode_command(RemotingCommand(
                    code=code, version=version, opaque=opaque, flag=FLAG_RESPONSE, remark=remark))
        return frames
