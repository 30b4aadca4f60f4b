"""The producer: routes, queue choice, retries, single, batch, oneway and ordered sends.

A send picks the next writable queue of the topic round-robin; when the broker refuses
for a reason that another broker may not share (or the connection fails), it tries again
on a queue of another broker, up to `retry_times_when_send_failed` more times, as
RocketMQ's DefaultMQProducer does. A `selector` (ordered sends) picks the queue itself and
is not retried elsewhere, since another queue would break the order (selectors.py has
RocketMQ's built-in ones). `send_async` is the callback form of `send` (Java's
`send(msg, SendCallback)`): it returns at once and calls `on_success(result)` or
`on_exception(error)` when the answer comes; the producer owns those sends and waits for
them on shutdown. Bodies over
`compress_msg_body_over` bytes go zlib-compressed with the COMPRESSED sys flag, which every
RocketMQ consumer understands. Requests are SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE frames
built from precompiled templates (the hot path); many sends may be in flight at once.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rocketport.common.batch.message_batch import ENTRY_HEAD, MIN_ENTRY_SIZE, PROPS_LEN
from rocketport.common.message import (
    COMPRESSED_FLAG,
    INNER_BATCH_FLAG,
    PROPERTY_DEDUP_KEY,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    encode_properties,
)
from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import HeartbeatData, MessageQueue, ProducerData
from rocketport.protocols.remoting.command import Buffer
from rocketport.protocols.remoting.frame import JsonFrameTemplate, json_text
from rocketport.protocols.remoting.messages import MessageClientIdGenerator

from .errors import ClientError
from .message import Message, SendResult, SendStatus
from .routing import AUTO_CREATE_TOPIC
from .runtime import ClientRuntime, log
from .transport import Tls

Selector = Callable[[list[MessageQueue], Message, Any], MessageQueue]
OnSuccess = Callable[[SendResult], Awaitable[None] | None]
OnException = Callable[[ClientError], Awaitable[None] | None]

MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # RocketMQ's maxMessageSize, also the batch limit
ASYNC_SEND_LIMIT = 50_000  # callback sends in flight at most (Java's async executor queue)
_TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")
_STATUS = {ResponseCode.SUCCESS: SendStatus.SEND_OK,
           ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
           ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
           ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}
# Refusals worth another broker (DefaultMQProducerImpl's retryResponseCodes).
_RETRY_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                          ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY,
                          ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
                          ResponseCode.NOT_IN_CURRENT_UNIT})


_UNIQ_HEAD = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01"


def _batch_body(msgs: Sequence[Message], ids: list[str], topic: str) -> bytes:
    """A batch send's body (`core.batch.message_batch` layout, magic and CRC zero as
    clients write them): each entry's properties with its unique id last. A message with
    no properties, tags or keys (the common case) skips building a dict for them."""
    parts: list[bytes] = []
    append = parts.append
    pack_head, pack_len, fixed = ENTRY_HEAD.pack, PROPS_LEN.pack, MIN_ENTRY_SIZE
    for msg, uniq in zip(msgs, ids):
        if msg.topic != topic:
            raise ClientError("a batch holds messages of one topic", ResponseCode.MESSAGE_ILLEGAL)
        if msg.delay_level or msg.deliver_at is not None:
            raise ClientError("a batch cannot hold delayed messages", ResponseCode.MESSAGE_ILLEGAL)
        head = encode_properties(msg.wire_properties()) if msg.properties or msg.tags or msg.keys else b""
        props = b"%s%s%s\x02" % (head, _UNIQ_HEAD, uniq.encode())
        if len(props) > 0x7FFF:
            raise ClientError("properties exceed 32767 bytes", ResponseCode.MESSAGE_ILLEGAL)
        body = msg.body
        append(pack_head(fixed + len(body) + len(props), 0, 0, 0, len(body)))
        append(body)
        append(pack_len(len(props)))
        append(props)
    return b"".join(parts)


def _send_template(code: RequestCode, batch: bool, oneway: bool) -> JsonFrameTemplate:
    # SEND_MESSAGE_V2's one-letter keys, as Java clients send them (batches too)
    return JsonFrameTemplate(code, {
        "a": bytes, "b": bytes, "c": AUTO_CREATE_TOPIC, "d": "4", "e": int, "f": int, "g": int,
        "h": "0", "i": bytes, "j": "0", "k": "false", "m": "true" if batch else "false"},
        flag=2 if oneway else 0)


_TEMPLATES = {(batch, oneway): _send_template(
    RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2, batch, oneway)
    for batch in (False, True) for oneway in (False, True)}


def check_topic(topic: str) -> None:
    if not _TOPIC_NAME.match(topic or ""):
        raise ClientError(f"invalid topic name {topic!r}: 1-127 of letters, digits, %|_-",
                          ResponseCode.MESSAGE_ILLEGAL)


class Producer:
    """Send messages to a RocketMQ 4.x cluster; use as ``async with Producer(...) as p``."""

    def __init__(self, namesrv: str | None = None, group: str = "DEFAULT_PRODUCER", *,
                 send_timeout_s: float = 3.0, retry_times_when_send_failed: int = 2,
                 compress_msg_body_over: int = 4096, max_message_size: int = MAX_MESSAGE_SIZE,
                 instance_name: str | None = None, async_send_limit: int = ASYNC_SEND_LIMIT,
                 credentials: tuple[str, str] | None = None, tls: Tls = None) -> None:
        self.group = group
        self.async_send_limit = async_send_limit
        self._async_sends: set[asyncio.Task[None]] = set()
        self.send_timeout_s = send_timeout_s
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.compress_msg_body_over = compress_msg_body_over
        self.max_message_size = max_message_size
        self.runtime = ClientRuntime(namesrv, timeout_s=send_timeout_s, instance_name=instance_name,
                                     credentials=credentials, tls=tls)
        self.runtime.heartbeat_data = self._heartbeat_data
        self._ids = MessageClientIdGenerator(self.runtime.ip)
        self._group_text = json_text(group.encode())
        self._topic_text: dict[str, bytes] = {}
        self._next_queue = 0
        self._started = False

    def _heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(self.runtime.client_id, producer_data_set=[ProducerData(self.group)])

    async def start(self) -> None:
        if self._started:
            return
        await self.runtime.start()
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        # callback sends already under way finish (and call back) first
        while pending := [t for t in self._async_sends if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)
        self._started = False
        await self.runtime.unregister(producer_group=self.group)
        await self.runtime.close()

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ---------------------------------------------------------------- sending
    async def send(self, msg: Message, *, selector: Selector | None = None, arg: Any = None,
                   queue: MessageQueue | None = None,
                   timeout_s: float | None = None) -> SendResult:
        """Send one message and wait for the broker's answer.

        `selector(queues, msg, arg)` picks the queue (ordered messages: the same `arg`,
        the same queue); `queue` names it directly."""
        body, props, sys_flag, uniq = self._prepare(msg)
        return await self._send(msg.topic, body, props, sys_flag, uniq, False, False,
                                await self._fixed_queue(msg, selector, arg, queue), timeout_s)

    def send_async(self, msg: Message, on_success: OnSuccess,
                   on_exception: OnException | None = None, *, selector: Selector | None = None,
                   arg: Any = None, queue: MessageQueue | None = None,
                   timeout_s: float | None = None) -> None:
        """Start sending `msg` and return at once; `on_success(result)` or
        `on_exception(error)` (plain functions or coroutine functions) is called with the
        outcome, as Java's `send(msg, SendCallback)`. Call it inside the running loop.
        Past `async_send_limit` sends in flight, `on_exception` is called at once."""
        if len(self._async_sends) >= self.async_send_limit:
            error = ClientError(f"{self.async_send_limit} async sends already in flight")
            if on_exception is None:
                log.warning("async send to %s refused: %s", msg.topic, error)
            else:
                result = on_exception(error)
                if inspect.isawaitable(result):
                    self._own(asyncio.ensure_future(result))
            return
        self._own(asyncio.create_task(self._send_with_callback(
            msg, on_success, on_exception, selector, arg, queue, timeout_s)))

    def _own(self, task: asyncio.Future[Any]) -> None:
        self._async_sends.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._async_sends.discard)

    async def _send_with_callback(self, msg: Message, on_success: OnSuccess,
                                  on_exception: OnException | None, selector: Selector | None,
                                  arg: Any, queue: MessageQueue | None,
                                  timeout_s: float | None) -> None:
        error: ClientError | None = None
        try:
            result = await self.send(msg, selector=selector, arg=arg, queue=queue,
                                     timeout_s=timeout_s)
        except ClientError as exc:
            error = exc
        if error is not None and on_exception is None:
            log.warning("async send to %s failed: %s", msg.topic, error)
            return
        try:
            outcome = on_success(result) if error is None else on_exception(error)  # type: ignore[misc]
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # the user's code: logged, never raised into the producer
            log.exception("send callback for %s raised", msg.topic)

    async def send_oneway(self, msg: Message, *, selector: Selector | None = None,
                          arg: Any = None, queue: MessageQueue | None = None) -> None:
        """Send without waiting for (or getting) the broker's answer."""
        body, props, sys_flag, uniq = self._prepare(msg)
        await self._send(msg.topic, body, props, sys_flag, uniq, False, True,
                         await self._fixed_queue(msg, selector, arg, queue), None)

    async def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout_s: float | None = None) -> SendResult:
        """Send messages of one topic as one request (4 MiB at most, none delayed)."""
        if not msgs:
            raise ClientError("empty batch", ResponseCode.MESSAGE_ILLEGAL)
        topic = msgs[0].topic
        check_topic(topic)
        ids = self._ids.next_ids(len(msgs))
        body = _batch_body(msgs, ids, topic)
        if len(body) > self.max_message_size:
            raise ClientError(f"batch of {len(body)} bytes exceeds {self.max_message_size}",
                              ResponseCode.MESSAGE_ILLEGAL)
        return await self._send(topic, body, b"", 0, ",".join(ids), True, False, queue, timeout_s)

    async def send_batch_body(self, topic: str, body: Buffer, *, queue: MessageQueue,
                              msg_id: str = "", timeout_s: float | None = None) -> SendResult:
        """Send a batch body encoded by the caller (`common.batch.message_batch` entries,
        each entry's properties carrying its UNIQ_KEY) to `queue`, as `send_batch` sends
        its own: for writers that build bodies straight from columns, with no Message per
        row. `msg_id` is what the result names (the ids joined by commas, or nothing)."""
        check_topic(topic)
        if not body:
            raise ClientError("empty batch", ResponseCode.MESSAGE_ILLEGAL)
        if len(body) > self.max_message_size:
            raise ClientError(f"batch of {len(body)} bytes exceeds {self.max_message_size}",
                              ResponseCode.MESSAGE_ILLEGAL)
        return await self._send(topic, body, b"", 0, msg_id, True, False, queue, timeout_s)

    async def send_inner_batch(self, topic: str, batch: Buffer, *, queue: MessageQueue,
                               dedup_key: str | None = None, timeout_s: float | None = None) -> SendResult:
        """Send one record batch (Kafka's v2 layout, `common.batch.record_batch`) to `queue`,
        to be stored whole as one inner batch (sysFlag INNER_BATCH_FLAG, as RocketMQ 5 marks
        one): one CommitLog record, each record its own message with its own offset for every
        reader. `dedup_key` names the batch as one unit the broker stores once (the Spark
        writer's chunks). A Rocketport extension: RocketMQ brokers refuse it."""
        check_topic(topic)
        if len(batch) > self.max_message_size:
            raise ClientError(f"batch of {len(batch)} bytes exceeds {self.max_message_size}",
                              ResponseCode.MESSAGE_ILLEGAL)
        props = encode_properties({PROPERTY_DEDUP_KEY: dedup_key}) if dedup_key is not None else b""
        return await self._send(topic, batch, props, INNER_BATCH_FLAG, "", True, False, queue, timeout_s)

    def _prepare(self, msg: Message) -> tuple[bytes, bytes, int, str]:
        check_topic(msg.topic)
        body = msg.body
        if not body:
            raise ClientError("message body is empty", ResponseCode.MESSAGE_ILLEGAL)
        if len(body) > self.max_message_size:
            raise ClientError(f"message body of {len(body)} bytes exceeds {self.max_message_size}",
                              ResponseCode.MESSAGE_ILLEGAL)
        sys_flag = 0
        if len(body) > self.compress_msg_body_over:
            body = zlib.compress(body, 5)
            sys_flag = COMPRESSED_FLAG
        props = msg.wire_properties()
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq = self._ids.next_id()
        return body, encode_properties(props), sys_flag, uniq

    async def _fixed_queue(self, msg: Message, selector: Selector | None, arg: Any,
                           queue: MessageQueue | None) -> MessageQueue | None:
        if selector is None:
            return queue
        queues = await self.runtime.routes.publish_queues(msg.topic)
        try:
            chosen = selector(list(queues), msg, arg)
        except Exception as exc:
            raise ClientError(f"queue selector failed: {exc!r}") from exc
        if not isinstance(chosen, MessageQueue):
            raise ClientError(f"queue selector returned {chosen!r}, not a MessageQueue")
        return chosen

    def _pick(self, queues: list[MessageQueue], avoid: str | None) -> MessageQueue:
        n = len(queues)
        for _ in range(n):
            self._next_queue += 1
            mq = queues[self._next_queue % n]
            if mq.broker_name != avoid:
                return mq
        self._next_queue += 1
        return queues[self._next_queue % n]

    def _request(self, topic: str, mq: MessageQueue, sys_flag: int, born: int, props: bytes,
                 batch: bool, body: Buffer) -> RemotingCommand:
        """The send as a command (what the templates render), for signed connections."""
        return RemotingCommand(
            RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2,
            ext_fields={"a": self.group, "b": topic, "c": AUTO_CREATE_TOPIC, "d": "4",
                        "e": str(mq.queue_id), "f": str(sys_flag), "g": str(born), "h": "0",
                        "i": props.decode("utf-8", "surrogateescape"), "j": "0", "k": "false",
                        "m": "true" if batch else "false"},
            body=body)

    async def _send(self, topic: str, body: Buffer, props: bytes, sys_flag: int, uniq: str,
                    batch: bool, oneway: bool, fixed: MessageQueue | None,
                    timeout_s: float | None) -> Any:
        if not self._started:
            raise ClientError("producer is not started")
        routes = self.runtime.routes
        topic_text = self._topic_text.get(topic)
        if topic_text is None:
            topic_text = self._topic_text[topic] = json_text(topic.encode())
        template = _TEMPLATES[batch, oneway]
        props_text = json_text(props)
        timeout_s = timeout_s or self.send_timeout_s
        attempts = 1 if fixed is not None or oneway else 1 + self.retry_times_when_send_failed
        if fixed is not None and fixed.broker_name not in routes.brokers:
            await routes.publish_queues(topic)  # learns the brokers' addresses
        avoid: str | None = None
        error: ClientError | None = None
        for _ in range(attempts):
            mq = fixed or self._pick(await routes.publish_queues(topic), avoid)
            try:
                conn = await self.runtime.pool.get(routes.broker_addr(mq.broker_name))
                born = int(time.time() * 1000)
                if conn.credentials is not None:  # signed: a command with its final fields
                    request = self._request(topic, mq, sys_flag, born, props, batch, body)
                    if oneway:
                        conn.invoke_oneway(request)
                        return None
                    response = await conn.invoke(request, timeout_s)
                else:
                    values = (self._group_text, topic_text, mq.queue_id, sys_flag, born, props_text)
                    if oneway:
                        conn.invoke_template_oneway(template, values, body)
                        return None
                    response = await conn.invoke_template(template, values, body, timeout_s)
            except ClientError as exc:
                error, avoid = exc, mq.broker_name
                continue
            status = _STATUS.get(response.code)
            if status is not None:
                fields = response.ext_fields
                return SendResult(status, uniq, fields.get("msgId", ""),
                                  MessageQueue(topic, mq.broker_name,
                                               int(fields.get("queueId", mq.queue_id))),
                                  int(fields.get("queueOffset", -1)), fields.get("transactionId"))
            error = ClientError(response.remark or "send refused", response.code)
            if response.code not in _RETRY_CODES:
                break
            avoid = mq.broker_name
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                await asyncio.sleep(0)  # let a concurrent route refresh land
        log.debug("send to %s failed: %s", topic, error)
        raise error  # type: ignore[misc]
