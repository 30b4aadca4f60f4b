"""What a push consumer answers when an admin reaches it through a broker.

mqadmin's consumerStatus (and consumerProgress -s) asks a broker, which passes
GET_CONSUMER_RUNNING_INFO (307) on over this client's connection: the answer is RocketMQ's
ConsumerRunningInfo (settings under the Java client's property names, subscriptions, a
ProcessQueueInfo per held queue, per-topic consume statistics, a stack dump of the
client's tasks when asked for one). queryMsgByUniqueKey -g -d has the broker pass on
CONSUME_MESSAGE_DIRECTLY (309) with a stored message: the consumer's listener consumes it
once, outside the queue's flow (no offset moves, nothing is sent back), and the answer is
ConsumeMessageDirectlyResult. It reads the consumer, never changes its queues.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode, make_response
from rocketport.protocols.remoting.bodies import MessageModel, SubscriptionData
from rocketport.protocols.remoting.messages import MessageFormatError, unpack_message_ext_records
from rocketport.protocols.remoting.mq_tables import MessageQueueKey
from rocketport.protocols.remoting.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ProcessQueueInfo,
    encode_direct_result,
    encode_running_info,
)

from .message import ConsumeResult, MessageExt
from .process_queue import Clock
from .transport import Connection

if TYPE_CHECKING:
    from .push import Listener, PushConsumer

log = logging.getLogger("rocketport.client")

CLIENT_VERSION = "V4_9_3_SNAPSHOT"  # MQVersion's name of 399, the version our requests carry
MAX_DIRECT_CONSUMPTIONS = 16  # 309s being consumed at once; more are refused, not queued
RETRY_PREFIX = "%RETRY%"


class AdminAnswers:
    """Answers 307 and 309 for one PushConsumer; owns the listener calls 309 starts."""

    def __init__(self, consumer: PushConsumer, listener: Callable[[], Listener | None],
                 clock: Clock) -> None:
        self._consumer = consumer
        self._listener = listener
        self._clock = clock
        self._start_ms = int(time.time() * 1000)  # Java's consumerStartTimestamp: construction
        self._tasks: set[asyncio.Task[None]] = set()
        consumer.runtime.handlers[RequestCode.GET_CONSUMER_RUNNING_INFO] = self._running_info
        consumer.runtime.handlers[RequestCode.CONSUME_MESSAGE_DIRECTLY] = self._consume_directly

    async def close(self) -> None:
        """Interrupt direct consumptions still running (their broker stops waiting anyway)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---------------------------------------------------------------- 307
    def running_info(self, jstack: bool = False) -> ConsumerRunningInfo:
        """The consumer now, as mqadmin consumerStatus shows it."""
        c = self._consumer
        queues = {}
        for mq in c.assigned:
            pq = c.process_queue_info(mq)
            if pq is not None:
                queues[MessageQueueKey(mq.topic, mq.broker_name, mq.queue_id)] = ProcessQueueInfo(
                    pq.commit_offset, pq.cached_msg_min_offset, pq.cached_msg_max_offset,
                    pq.cached_msg_count, locked=pq.locked, dropped=pq.dropped,
                    last_lock_timestamp=self._epoch_ms(pq.last_lock_timestamp) if pq.last_lock_timestamp else 0,
                    last_pull_timestamp=self._epoch_ms(pq.last_pull_timestamp),
                    last_consume_timestamp=self._epoch_ms(pq.last_consume_timestamp))
        subs = [SubscriptionData(s.topic, s.expression, tags_set=sorted(s.tags or ()),
                                 expression_type=s.expression_type)
                for s in c.subscriptions.values()]
        if c.model is MessageModel.CLUSTERING:
            subs.append(SubscriptionData(RETRY_PREFIX + c.group))
        subs.sort(key=lambda s: s.topic)
        return ConsumerRunningInfo(
            self._properties(), subs, queues,
            {s.topic: c.stats.status(s.topic) for s in subs},
            _task_stacks() if jstack else None)

    def _properties(self) -> dict[str, str]:
        """The settings under DefaultMQPushConsumer's field names, and Java's PROP_ keys."""
        c, runtime = self._consumer, self._consumer.runtime
        return {
            "consumerGroup": c.group, "messageModel": c.model.name,
            "consumeFromWhere": "CONSUME_FROM_" + {"last": "LAST_OFFSET", "first": "FIRST_OFFSET",
                                                   "timestamp": "TIMESTAMP"}[c.consume_from],
            "consumeTimestamp": time.strftime("%Y%m%d%H%M%S", time.localtime(c.consume_timestamp)),
            "consumeThreadMax": str(c.consume_thread_max),
            "consumeMessageBatchMaxSize": str(c.consume_batch_size),
            "pullBatchSize": str(c.pull_batch_size),
            "pullThresholdForQueue": str(c.pull_threshold_for_queue),
            "maxReconsumeTimes": str(c.max_reconsume_times),
            "suspendCurrentQueueTimeMillis": str(int(c.suspend_current_queue_s * 1000)),
            "consumeTimeout": str(int(c.consume_timeout_s // 60)),  # minutes, as Java's
            "namesrvAddr": ";".join(runtime.routes.addrs), "clientIP": runtime.ip,
            PROP_CONSUME_ORDERLY: "true" if c.orderly else "false",
            PROP_THREADPOOL_CORE_SIZE: str(c.consume_thread_max),
            PROP_CONSUMER_START_TIMESTAMP: str(self._start_ms),
            PROP_NAMESERVER_ADDR: "".join(a + ";" for a in runtime.routes.addrs),
            PROP_CONSUME_TYPE: "CONSUME_PASSIVELY",
            PROP_CLIENT_VERSION: CLIENT_VERSION,
        }

    def _epoch_ms(self, at: float) -> int:
        """A time on the consumer's clock as epoch milliseconds."""
        return int((time.time() - (self._clock() - at)) * 1000)

    def _running_info(self, conn: Connection, command: RemotingCommand) -> None:
        fields = command.ext_fields
        if not self._mine(conn, command):
            return
        jstack = fields.get("jstackEnable", "false").lower() == "true"
        conn.respond(make_response(command, ResponseCode.SUCCESS,
                                   body=encode_running_info(self.running_info(jstack))))

    def _mine(self, conn: Connection, command: RemotingCommand) -> bool:
        """Whether the request is for this consumer's group; answered SYSTEM_ERROR if not."""
        group = command.ext_fields.get("consumerGroup")
        if group == self._consumer.group:
            return True
        conn.respond(make_response(command, ResponseCode.SYSTEM_ERROR,
                                   f"The Consumer Group <{group}> not exist in this consumer"))
        return False

    # ---------------------------------------------------------------- 309
    def _consume_directly(self, conn: Connection, command: RemotingCommand) -> None:
        if not self._mine(conn, command):
            return
        listener = self._listener()
        if listener is None or len(self._tasks) >= MAX_DIRECT_CONSUMPTIONS:
            conn.respond(make_response(command, ResponseCode.SYSTEM_ERROR,
                                       "no listener registered" if listener is None else
                                       f"{MAX_DIRECT_CONSUMPTIONS} direct consumptions already running"))
            return
        try:
            [raw] = unpack_message_ext_records(command.body)
        except (MessageFormatError, ValueError) as exc:
            conn.respond(make_response(command, ResponseCode.SYSTEM_ERROR, f"bad message record: {exc}"))
            return
        msg = MessageExt(raw, command.ext_fields.get("brokerName", ""))
        msg.reset_retry_topic()
        task = asyncio.create_task(self._consume(conn, command, listener, msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _consume(self, conn: Connection, command: RemotingCommand,
                       listener: Callable[[list[MessageExt]], Awaitable[ConsumeResult]],
                       msg: MessageExt) -> None:
        """As Java's consumeMessageDirectly: one listener call on the message, its verdict
        (an exception's text in the remark) and how long it took."""
        orderly = self._consumer.orderly
        started = time.monotonic()
        remark = None
        try:
            verdict = await listener([msg])
        except Exception as exc:  # the user's code: reported, not raised
            result = CMResult.CR_THROW_EXCEPTION
            remark = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        else:
            result = (CMResult.CR_SUCCESS if verdict is ConsumeResult.SUCCESS else
                      CMResult.CR_LATER if verdict is ConsumeResult.RECONSUME_LATER else
                      CMResult.CR_RETURN_NULL)
        spent = int((time.monotonic() - started) * 1000)
        log.info("%s consumed %s directly for an admin: %s", self._consumer.group, msg.msg_id, result.name)
        conn.respond(make_response(command, ResponseCode.SUCCESS, body=encode_direct_result(
            ConsumeMessageDirectlyResult(orderly, True, result, remark, spent))))


def _task_stacks() -> str:
    """The client's jstack: every task of its event loop with its stack."""
    out = io.StringIO()
    for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
        task.print_stack(file=out)
        out.write("\n")
    return out.getvalue()
