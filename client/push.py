"""The push consumer: rebalance, one puller per held queue, listener calls, retries.

Clustering: the group's queues are shared out (average or average-by-circle) among the
consumers the broker knows, again every 20 s and whenever the broker says the group
changed; a queue that moves away is dropped after its in-flight batches and its offset is
committed. Broadcasting: every consumer takes every queue and keeps offsets in a local
file. Per queue, a pull task long-polls batches of `pull_batch_size` into the queue's
ProcessQueue (paused above `pull_threshold_for_queue` cached messages). A concurrent
consumer hands them to a pool of `consume_thread_max` listener calls
(consume_concurrently.py), `consume_batch_size` at a time, committing the lowest
unfinished offset; an orderly one consumes each queue one batch at a time, in order, only
while it holds the broker's lock on it (renewed every 20 s), retrying a failed batch in
place. RECONSUME_LATER or a listener exception sends the batch back to the group's retry
topic (CONSUMER_SEND_MSG_BACK; the broker moves it to the DLQ past `max_reconsume_times`);
a message that cannot be sent back is retried here.

A reset the broker pushes (RESET_CONSUMER_CLIENT_OFFSET, from mqadmin resetOffsetByTime)
drops the named queues' work, commits the new offsets and pulls again from them, so the
old position is never committed over the reset. A queue not pulled for `pull_max_idle_s`
(a puller that stopped) is dropped by the next rebalance, which takes it again at once
with a new puller (as RebalanceImpl does with an expired ProcessQueue). Offsets are
committed every 5 s and on shutdown; heartbeats carry the subscriptions; shutdown
unregisters. What an admin asks through a broker (running info, a direct consumption)
is answered by admin_answers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rocketport.protocols.remoting import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    make_response,
    mq_tables,
)
from rocketport.protocols.remoting.bodies import (
    BodyError,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    decode_body,
    encode_body,
)

from .admin_answers import AdminAnswers
from .consume_stats import ConsumeStats
from .consume_concurrently import ConsumeMessageConcurrentlyService
from .errors import ClientError
from .message import ConsumeResult, MessageExt
from .offsets import LocalOffsetStore, OffsetStore, RemoteOffsetStore
from .process_queue import Clock, ProcessQueueInfo
from .pulling import PULL_TIMEOUT_S, PullStatus, Puller, Subscription, outcome, received
from .queue_work import QueueWork
from .rebalance import STRATEGIES
from .routing import queue_order
from .runtime import ClientRuntime, log
from .transport import Connection, Sent, Tls

Listener = Callable[[list[MessageExt]], Awaitable[ConsumeResult]]

RETRY_PREFIX = "%RETRY%"
_FROM_WHERE = {"last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
               "first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
               "timestamp": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP}
_MODELS = {"clustering": MessageModel.CLUSTERING, "broadcasting": MessageModel.BROADCASTING}


class PushConsumer:
    """Messages pushed to a listener; see the module docstring for the behaviour."""

    def __init__(self, group: str, namesrv: str | None = None, *, model: str = "clustering",
                 consume_from: str = "last", consume_timestamp: float | None = None,
                 orderly: bool = False, allocate: str = "avg", pull_batch_size: int = 32,
                 consume_batch_size: int = 1, pull_threshold_for_queue: int = 1000,
                 max_reconsume_times: int = 16, offset_store_dir: str | Path | None = None,
                 instance_name: str | None = None, rebalance_interval_s: float = 20.0,
                 persist_interval_s: float = 5.0, heartbeat_interval_s: float = 30.0,
                 suspend_current_queue_s: float = 1.0, pull_retry_delay_s: float = 1.0,
                 consume_thread_max: int = 20, consume_timeout_s: float = 900.0,
                 pull_max_idle_s: float = 120.0, clock: Clock = time.monotonic,
                 credentials: tuple[str, str] | None = None, tls: Tls = None) -> None:
        if model not in _MODELS:
            raise ValueError(f"model must be one of {sorted(_MODELS)}")
        if consume_from not in _FROM_WHERE:
            raise ValueError(f"consume_from must be one of {sorted(_FROM_WHERE)}")
        if allocate not in STRATEGIES:
            raise ValueError(f"allocate must be one of {sorted(STRATEGIES)}")
        if consume_thread_max < 1:
            raise ValueError("consume_thread_max must be at least 1")
        self.group = group
        self.model = _MODELS[model]
        self.consume_from = consume_from
        self.consume_timestamp = consume_timestamp if consume_timestamp is not None else time.time() - 1800
        self.orderly = orderly
        self.pull_batch_size = pull_batch_size
        self.consume_batch_size = consume_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_s = suspend_current_queue_s
        self.pull_retry_delay_s = pull_retry_delay_s
        self.consume_thread_max = consume_thread_max
        self.consume_timeout_s = consume_timeout_s
        self.pull_max_idle_s = pull_max_idle_s
        self._clock = clock
        self.stats = ConsumeStats(clock)  # consumerStatus's pull and consume figures
        self._allocate = STRATEGIES[allocate]
        self._rebalance_interval_s = rebalance_interval_s
        self._persist_interval_s = persist_interval_s
        self.runtime = ClientRuntime(namesrv, heartbeat_interval_s=heartbeat_interval_s,
                                     instance_name=instance_name, credentials=credentials, tls=tls)
        self.runtime.heartbeat_data = self._heartbeat_data
        self.runtime.handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] = self._ids_changed
        self.runtime.handlers[RequestCode.RESET_CONSUMER_CLIENT_OFFSET] = self._reset_pushed
        self._admin_answers = AdminAnswers(self, lambda: self._listener, clock)  # 307, 309
        self.subscriptions: dict[str, Subscription] = {}
        self._listener: Listener | None = None
        self._puller = Puller(group)
        self._work: dict[MessageQueue, QueueWork] = {}
        self._service: ConsumeMessageConcurrentlyService | None = None
        self._rebalance_lock = asyncio.Lock()  # a rebalance and a pushed reset, one at a time
        self._resets: set[asyncio.Task[None]] = set()
        self._offsets: OffsetStore
        if self.model is MessageModel.BROADCASTING:
            root = Path(offset_store_dir) if offset_store_dir else Path.home() / ".rocketmq_offsets"
            self._offsets = LocalOffsetStore(
                root / f"{self.runtime.ip}@{instance_name or 'DEFAULT'}" / group / "offsets.json")
        else:
            self._offsets = RemoteOffsetStore(self.runtime, group)
        self._rebalance_wanted: asyncio.Event | None = None
        self._rebalancer: asyncio.Task[None] | None = None
        self._started = False

    # ---------------------------------------------------------------- configuration
    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        """Receive `topic`'s messages whose tags match `expression` ("TagA || TagB", "*"),
        or, with `sql`, whose properties satisfy the SQL92 condition."""
        self.subscriptions[topic] = (Subscription(topic, sql, "SQL92") if sql is not None
                                     else Subscription(topic, expression or "*", "TAG"))

    def register(self, listener: Listener) -> None:
        """`async def listener(msgs) -> ConsumeResult`; an exception counts as RECONSUME_LATER."""
        self._listener = listener

    def _all_subscriptions(self) -> dict[str, Subscription]:
        subs = dict(self.subscriptions)
        if self.model is MessageModel.CLUSTERING:
            retry = RETRY_PREFIX + self.group
            subs[retry] = Subscription(retry)
        return subs

    def _heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(self.runtime.client_id, consumer_data_set=[ConsumerData(
            self.group, ConsumeType.CONSUME_PASSIVELY, self.model, _FROM_WHERE[self.consume_from],
            [SubscriptionData(s.topic, s.expression, expression_type=s.expression_type,
                              tags_set=sorted(s.tags or ()))
             for s in self._all_subscriptions().values()])])

    # ---------------------------------------------------------------- life cycle
    async def start(self) -> None:
        if self._started:
            return
        if self._listener is None or not self.subscriptions:
            raise ClientError("register a listener and subscribe to a topic before start()")
        self._rebalance_wanted = asyncio.Event()
        for topic in self.subscriptions:
            if await self.runtime.routes.route(topic) is None:
                raise ClientError(f"topic {topic} does not exist", ResponseCode.TOPIC_NOT_EXIST)
        await self.runtime.start()
        await self.runtime.heartbeat()
        self._started = True
        self.runtime.spawn(self._persist_interval_s, self._offsets.persist)
        if not self.orderly:
            self._service = ConsumeMessageConcurrentlyService(
                self._listener, threads=self.consume_thread_max,
                batch_size=self.consume_batch_size, pull_threshold=self.pull_threshold_for_queue,
                send_back=self._send_back, offset_moved=self._offset_moved,
                broadcasting=self.model is MessageModel.BROADCASTING,
                retry_delay_s=self.suspend_current_queue_s,
                consume_timeout_s=self.consume_timeout_s, works=lambda: self._work.values(),
                stats=self.stats)
            self._service.start()
        if self.orderly:
            self.runtime.spawn(20.0, self._lock_all)
        try:
            await self.rebalance()
        except BaseException:
            await self.shutdown()  # no task left behind by a start that failed
            raise
        self._rebalancer = asyncio.create_task(self._rebalance_loop())

    async def shutdown(self) -> None:
        """Stop consuming, commit offsets, release locks, unregister from the brokers."""
        if not self._started:
            return
        self._started = False
        if self._rebalancer is not None:
            self._rebalancer.cancel()
            await asyncio.gather(self._rebalancer, return_exceptions=True)
        for task in list(self._resets):
            task.cancel()
        await asyncio.gather(*self._resets, return_exceptions=True)
        await self._admin_answers.close()
        held = list(self._work)
        await asyncio.gather(*(self._drop(mq, persist=False) for mq in held))
        if self._service is not None:
            await self._service.stop()
            self._service = None
        await self._offsets.persist()
        if self.orderly:
            await self._unlock(held)
        await self.runtime.unregister(consumer_group=self.group)
        await self.runtime.close()

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def assigned(self) -> list[MessageQueue]:
        """The queues this consumer holds now."""
        return sorted(self._work, key=queue_order)

    def process_queue_info(self, mq: MessageQueue) -> ProcessQueueInfo | None:
        """A snapshot of a held queue (None when not held): what is cached, being
        consumed, the offset committed for it next, when it was last pulled."""
        work = self._work.get(mq)
        if work is None:
            return None
        return work.pq.info(self._offsets.offsets.get(mq, -1))

    def _offset_moved(self, work: QueueWork, offset: int) -> None:
        """A finished batch moved the queue's committable offset (unless a reset or a drop
        made it stale)."""
        if work.may_move_offset:
            self._offsets.update(work.mq, offset)

    # ---------------------------------------------------------------- rebalance
    def _ids_changed(self, conn: Connection, command: RemotingCommand) -> None:
        if self._rebalance_wanted is not None:
            self._rebalance_wanted.set()

    async def _rebalance_loop(self) -> None:
        wanted = self._rebalance_wanted
        assert wanted is not None
        while True:
            await _wait(wanted, self._rebalance_interval_s)
            wanted.clear()
            try:
                await self.rebalance()
            except ClientError as exc:
                log.warning("rebalance of %s failed: %s", self.group, exc)

    async def _consumer_ids(self, topic_queues: list[MessageQueue]) -> list[str]:
        addr = self.runtime.routes.read_addr(topic_queues[0].broker_name)
        response = await self.runtime.invoke_ok(addr, RemotingCommand(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": self.group}),
            "consumer list")
        try:
            return sorted(decode_body(GetConsumerListByGroupResponseBody, response.body).consumer_id_list)
        except BodyError as exc:
            raise ClientError(f"bad consumer list: {exc}") from None

    async def rebalance(self) -> None:
        """Work out this consumer's queues now and start or drop queue work to match."""
        async with self._rebalance_lock:
            await self._rebalance()

    async def _rebalance(self) -> None:
        wanted: list[MessageQueue] = []
        for topic in self._all_subscriptions():
            try:
                queues = await self.runtime.routes.subscribe_queues(topic, refresh=True)
            except ClientError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST and topic.startswith(RETRY_PREFIX):
                    continue  # the broker creates the retry topic on first send-back
                raise
            if not queues:
                continue
            if self.model is MessageModel.BROADCASTING:
                wanted += queues
            else:
                wanted += self._allocate(queues, await self._consumer_ids(queues),
                                         self.runtime.client_id)
        keep = set(wanted)
        # PULL_MAX_IDLE: a held queue whose puller stopped is dropped (its offset committed)
        # and taken again below, as RebalanceImpl does with an expired ProcessQueue
        idle = [mq for mq, work in self._work.items()
                if mq in keep and work.pq.is_pull_expired(self.pull_max_idle_s)]
        for mq in idle:
            log.warning("%s not pulled for over %s s: dropped, to be taken again", mq,
                        self.pull_max_idle_s)
        await asyncio.gather(*(self._drop(mq) for mq in list(self._work)
                               if mq not in keep or mq in idle))
        new = [mq for mq in wanted if mq not in self._work]
        if self.orderly and new:
            new = await self._lock(new)
        for mq in new:
            self._start_work(mq, await self._initial_offset(mq), locked=self.orderly)

    def _start_work(self, mq: MessageQueue, offset: int, locked: bool) -> None:
        work = self._work[mq] = QueueWork(mq, offset, self._clock)
        work.locked = locked
        work.tasks = [asyncio.create_task(self._pull_loop(work))]
        if self.orderly:
            work.tasks.append(asyncio.create_task(self._consume_loop(work)))

    async def _initial_offset(self, mq: MessageQueue) -> int:
        """Where a queue's consumption starts: the committed offset, else `consume_from`."""
        offset = await self._offsets.read(mq)
        if offset >= 0:
            return offset
        if self.consume_from == "first" or mq.topic.startswith(RETRY_PREFIX):
            return 0
        addr = self.runtime.routes.read_addr(mq.broker_name)
        fields = {"topic": mq.topic, "queueId": str(mq.queue_id)}
        if self.consume_from == "last":
            request = RemotingCommand(RequestCode.GET_MAX_OFFSET, ext_fields=fields)
        else:
            fields["timestamp"] = str(int(self.consume_timestamp * 1000))
            request = RemotingCommand(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext_fields=fields)
        response = await self.runtime.invoke_ok(addr, request, "offset lookup")
        return int(response.ext_fields.get("offset", 0))

    async def _drop(self, mq: MessageQueue, persist: bool = True) -> None:
        """Stop a queue's work (its in-flight batches finish first) and commit its offset."""
        work = self._work.pop(mq, None)
        if work is None:
            return
        work.pq.dropped = True
        puller = work.tasks[0]
        puller.cancel()
        work.ready.set()
        work.room.set()
        await asyncio.gather(puller, return_exceptions=True)
        if self.orderly:
            _, stuck = await asyncio.wait(work.tasks[1:], timeout=30.0)
            for task in stuck:  # a listener busy for 30 s more is interrupted
                task.cancel()
        else:  # calls of the pool's workers: waited for, never interrupted
            waiter = asyncio.ensure_future(work.idle.wait())
            await asyncio.wait([waiter], timeout=30.0)
            waiter.cancel()
        if persist:
            await self._offsets.persist([mq])
            self._offsets.remove(mq)
            work.closed = True
            if self.orderly:
                await self._unlock([mq])

    # ---------------------------------------------------------------- pushed reset
    def _reset_pushed(self, conn: Connection, command: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (220): the broker reset the group's offsets of a
        topic (ResetOffsetBody: offsets keyed by queue). Held queues stop moving their
        offset at once, so neither a commit nor a pull carries the old position over the
        reset; the rest (drop, commit, pull again) is `_reset_offset`."""
        if not command.is_oneway:
            conn.respond(make_response(command, ResponseCode.SUCCESS))
        fields = command.ext_fields
        if fields.get("group") != self.group or not self._started:
            return
        topic = fields.get("topic")
        try:
            table = mq_tables.loads(bytes(command.body))["offsetTable"]
            offsets = {MessageQueue(k.topic, k.broker_name, int(k.queue_id)): int(v)
                       for k, v in table.items() if k.topic == topic}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring a reset of %s with an unreadable body: %s", self.group, exc)
            return
        for mq, offset in offsets.items():
            work = self._work.get(mq)
            if work is not None:
                work.discard = True
                self._offsets.update(mq, offset)
        task = asyncio.create_task(self._reset_offset(offsets))
        self._resets.add(task)
        task.add_done_callback(self._reset_done)

    def _reset_done(self, task: asyncio.Task[None]) -> None:
        self._resets.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("reset of %s failed", self.group, exc_info=task.exception())

    async def _reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """As the Java client's resetOffset: drop the held queues' process queues, set and
        commit the new offsets, then pull from them (at once here, where Java waits for
        its next rebalance). Queues not held here are the broker's business alone."""
        async with self._rebalance_lock:
            held = [mq for mq in offsets if mq in self._work]
            if not held:
                return
            locked = {mq: self._work[mq].locked for mq in held}
            await asyncio.gather(*(self._drop(mq, persist=False) for mq in held))
            for mq in held:
                self._offsets.remove(mq)  # forget what was committed: commit again
                self._offsets.update(mq, offsets[mq])
            await self._offsets.persist(held)
            for mq in held:
                log.info("%s of %s reset to offset %d", mq, self.group, offsets[mq])
                self._start_work(mq, offsets[mq], locked[mq])

    # ---------------------------------------------------------------- orderly locks
    def _by_broker(self, mqs: list[MessageQueue]) -> dict[str, list[MessageQueue]]:
        grouped: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            grouped.setdefault(mq.broker_name, []).append(mq)
        return grouped

    async def _lock(self, mqs: list[MessageQueue]) -> list[MessageQueue]:
        """Lock `mqs` on their brokers; the ones granted, in the order given."""
        granted: set[MessageQueue] = set()
        for broker, group in self._by_broker(mqs).items():
            body = encode_body(LockBatchRequestBody(self.group, self.runtime.client_id, group))
            try:
                response = await self.runtime.invoke_ok(
                    self.runtime.routes.broker_addr(broker),
                    RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=body), "queue lock")
                granted.update(decode_body(LockBatchResponseBody, response.body).lock_ok_mq_set)
            except (ClientError, BodyError) as exc:
                log.warning("locking queues on %s failed: %s", broker, exc)
        return [mq for mq in mqs if mq in granted]

    async def _lock_all(self) -> None:
        held = list(self._work)
        granted = set(await self._lock(held))
        for mq in held:
            work = self._work.get(mq)
            if work is not None:
                work.locked = mq in granted
                if work.locked:
                    work.ready.set()

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        for broker, group in self._by_broker(mqs).items():
            body = encode_body(LockBatchRequestBody(self.group, self.runtime.client_id, group))
            with contextlib.suppress(ClientError):
                await self.runtime.invoke(self.runtime.routes.broker_addr(broker),
                                          RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, body=body))

    # ---------------------------------------------------------------- per-queue work
    async def _pull_loop(self, work: QueueWork) -> None:
        mq = work.mq
        sub = self._all_subscriptions().get(mq.topic)
        if sub is None:
            return
        routes, pool, puller = self.runtime.routes, self.runtime.pool, self._puller
        threshold, batch = self.pull_threshold_for_queue, self.pull_batch_size
        clustering = self.model is MessageModel.CLUSTERING
        offsets = self._offsets.offsets
        pq = work.pq
        conn: Connection | None = None
        sent: Sent | None = None  # a pull on the wire
        sent_at = 0.0
        clock, stats = self._clock, self.stats

        def send(offset: int) -> Sent:
            nonlocal sent_at
            assert conn is not None
            sent_at = clock()
            return puller.send(conn, mq, offset, batch, sub, suspend=True, send_subscription=False,
                               commit_offset=offsets.get(mq, -1) if clustering else -1)

        while not work.dropped:
            start = work.next_offset  # where the pull answered next began
            pq.mark_pulled()
            try:
                if sent is None:
                    if work.cached >= threshold:  # flow control: wait for the listener
                        work.room.clear()
                        pq.pulling_paused = True  # held back, not idle (PULL_MAX_IDLE)
                        try:
                            await work.room.wait()
                        finally:
                            pq.pulling_paused = False
                        continue
                    conn = await pool.get(routes.read_addr(mq.broker_name))
                    sent = send(work.next_offset)
                assert conn is not None
                response = await conn.response(sent, PULL_TIMEOUT_S)
                rt_ms = (clock() - sent_at) * 1000
                sent = None
                status, next_offset, _, _ = outcome(response)
                if work.dropped:
                    return
                work.next_offset = next_offset
                if status is PullStatus.FOUND and work.cached + next_offset - start < threshold:
                    # the next pull leaves before this answer is decoded, in one write with
                    # those of the other queues answered in the same read (the yield): the
                    # broker reads on while this consumer decodes
                    sent = send(next_offset)
                    await asyncio.sleep(0)
                messages = received(response, mq, sub) if status is PullStatus.FOUND else []
                stats.pulled(mq.topic, rt_ms, len(messages))
            except ClientError as exc:  # an answer that did not decode is pulled again
                log.debug("pull of %s failed: %s", mq, exc)
                work.next_offset, sent = start, None
                await asyncio.sleep(self.pull_retry_delay_s)
                continue
            if messages:
                pq.put(messages)
                if self._service is not None:
                    self._service.submit(work, messages)
                else:
                    work.buffer.append(messages)
                    work.ready.set()
            elif status is PullStatus.OFFSET_ILLEGAL or (not work.cached and not work.consuming):
                self._offset_moved(work, next_offset)

    async def _consume_loop(self, work: QueueWork) -> None:
        """Orderly: the queue's batches one at a time, in order, while its lock is held."""
        listener = self._listener
        assert listener is not None
        buffer, size = work.buffer, self.consume_batch_size
        mq, room, pq = work.mq, work.room, work.pq
        threshold = self.pull_threshold_for_queue
        retry_topic = mq.topic.startswith(RETRY_PREFIX)
        while True:
            if work.dropped:  # what is still buffered is the next owner's (or the reset's)
                return
            if not buffer or not work.locked:
                work.ready.clear()
                await _wait(work.ready, 1.0 if not work.locked else None)
                continue
            batch = buffer[0]
            if len(batch) <= size:  # a whole pulled batch: handed over as it is
                buffer.popleft()
            else:
                buffer[0] = batch[size:]
                batch = batch[:size]
            if retry_topic:
                for msg in batch:
                    msg.reset_retry_topic()
            work.consuming = True
            pq.begin(batch)
            try:
                ok = await self._deliver(listener, batch, work)
            finally:
                work.consuming = False
            if not ok:  # orderly, to be retried in place; or could not be sent back
                buffer.appendleft(batch)
                await asyncio.sleep(self.suspend_current_queue_s)
                continue
            offset = pq.remove(batch)
            if offset >= 0:
                self._offset_moved(work, offset)
            if work.cached < threshold:
                room.set()

    async def _deliver(self, listener: Listener, batch: list[MessageExt], work: QueueWork) -> bool:
        """Orderly: hand `batch` to the listener; True when it is done with (consumed, or
        sent back), False to retry it in place."""
        started = self._clock()
        try:
            result = await listener(batch)
        except Exception as exc:  # the user's code: any failure means "later"
            log.warning("listener of %s raised %r: reconsuming later", self.group, exc)
            result = ConsumeResult.RECONSUME_LATER
        ok = result is ConsumeResult.SUCCESS
        self.stats.consumed(work.mq.topic, (self._clock() - started) * 1000,
                            len(batch) if ok else 0, 0 if ok else len(batch))
        if ok:
            return True
        if self.model is MessageModel.BROADCASTING:
            log.warning("broadcast messages %s not consumed: dropped, as RocketMQ does",
                        [m.msg_id for m in batch])
            return True
        if all(m.reconsume_times < self.max_reconsume_times for m in batch):
            for msg in batch:
                msg.reconsume_times += 1
            return False
        # past the limit: straight to the dead letters (a negative delay level)
        sent = await asyncio.gather(*(self._send_back(m, -1) for m in batch))
        return all(sent)

    async def _send_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK: the broker stores a copy in the retry topic (the DLQ
        past the limit); False when it could not be done (the message is retried here)."""
        fields = {"offset": str(msg.commit_log_offset), "group": self.group, "delayLevel": str(delay_level),
                  "originMsgId": msg.msg_id, "originTopic": msg.topic,
                  "maxReconsumeTimes": str(self.max_reconsume_times)}
        try:
            await self.runtime.invoke_ok(self.runtime.routes.broker_addr(msg.broker_name),
                                         RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                         ext_fields=fields), "send back")
        except ClientError as exc:
            log.warning("sending %s back failed: %s", msg.msg_id, exc)
            return False
        return True



async def _wait(event: asyncio.Event, timeout_s: float | None) -> None:
    """Until `event` is set or `timeout_s` passed. Not `asyncio.wait_for`: on 3.11 a
    cancellation arriving as its timeout fires can be lost, which hung shutdown."""
    if timeout_s is None:
        await event.wait()
        return
    timer = asyncio.get_running_loop().call_later(timeout_s, event.set)
    try:
        await event.wait()
    finally:
        timer.cancel()
