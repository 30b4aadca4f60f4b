"""Concurrent consumption (RocketMQ's ConsumeMessageConcurrentlyService): a pool of
`consume_thread_max` worker tasks takes batches of any held queue and calls the listener,
so several batches of one queue may be in the listener at once and finish in any order.

A finished batch leaves its ProcessQueue and the queue's offset moves to the lowest
unfinished message (never past one still being consumed). A batch the listener refuses is
sent back to the group's retry topic; one that cannot be sent back is consumed here again
after `retry_delay_s`. Every `consume_timeout_s` the head of each queue is checked: a
message whose listener call began longer ago is sent back (delay level 3, as
cleanExpiredMsg does) and leaves the queue, so one stuck call cannot hold the group's
offset forever. The call itself is not interrupted: it is the user's code. This service
never pulls and never commits; the consumer does both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from .consume_stats import ConsumeStats
from .message import ConsumeResult, MessageExt
from .queue_work import QueueWork
from .runtime import log

Listener = Callable[[list[MessageExt]], Awaitable[ConsumeResult]]
SendBack = Callable[[MessageExt, int], Awaitable[bool]]
OffsetMoved = Callable[[QueueWork, int], None]

RETRY_PREFIX = "%RETRY%"
EXPIRED_DELAY_LEVEL = 3  # cleanExpiredMsg's sendMessageBack(msg, 3)
_EXPIRED_PER_ROUND = 16  # heads looked at per queue and round, as cleanExpiredMsg does


class ConsumeMessageConcurrentlyService:
    """The worker pool; `submit` hands it pulled messages of a held queue."""

    def __init__(self, listener: Listener, *, threads: int, batch_size: int,
                 pull_threshold: int, send_back: SendBack, offset_moved: OffsetMoved,
                 broadcasting: bool, retry_delay_s: float, consume_timeout_s: float,
                 works: Callable[[], Iterable[QueueWork]], stats: ConsumeStats) -> None:
        self._listener = listener
        self._stats = stats
        self._threads = threads
        self._batch_size = batch_size
        self._threshold = pull_threshold
        self._send_back = send_back
        self._offset_moved = offset_moved
        self._broadcasting = broadcasting
        self._retry_delay_s = retry_delay_s
        self._consume_timeout_s = consume_timeout_s
        self._works = works
        # bounded in effect: every entry is a cached message, and the pullers stop at
        # pull_threshold_for_queue cached messages per queue
        self._requests: asyncio.Queue[tuple[QueueWork, list[MessageExt]]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._later: set[asyncio.TimerHandle] = set()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self._threads)]
        self._tasks.append(asyncio.create_task(self._clean_expired_loop()))

    async def stop(self) -> None:
        """End the workers (the consumer has dropped every queue first)."""
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def submit(self, work: QueueWork, msgs: list[MessageExt]) -> None:
        """Queue `msgs` (already in `work.pq`) for the listener, `batch_size` a call."""
        size = self._batch_size
        for i in range(0, len(msgs), size):
            self._requests.put_nowait((work, msgs[i:i + size]))

    # ---------------------------------------------------------------- workers
    async def _worker(self) -> None:
        while True:
            work, batch = await self._requests.get()
            if not work.dropped:  # a dropped queue's waiting batches are its new owner's
                await self._consume(work, batch)

    async def _consume(self, work: QueueWork, batch: list[MessageExt]) -> None:
        pq = work.pq
        if work.mq.topic.startswith(RETRY_PREFIX):
            for msg in batch:
                msg.reset_retry_topic()
        pq.begin(batch)
        work.in_flight += 1
        work.idle.clear()
        try:
            started = self._stats.clock()
            try:
                result = await self._listener(batch)
            except Exception as exc:  # the user's code: any failure means "later"
                log.warning("listener of %s raised %r: reconsuming later", work.mq, exc)
                result = ConsumeResult.RECONSUME_LATER
            ok = result is ConsumeResult.SUCCESS
            self._stats.consumed(work.mq.topic, (self._stats.clock() - started) * 1000,
                                 len(batch) if ok else 0, 0 if ok else len(batch))
            done = batch
            if not ok:
                done = await self._refused(work, batch)
            offset = pq.remove(done)
            if offset >= 0:
                self._offset_moved(work, offset)
            if work.cached < self._threshold:
                work.room.set()
        finally:
            work.in_flight -= 1
            if not work.in_flight:
                work.idle.set()

    async def _refused(self, work: QueueWork, batch: list[MessageExt]) -> list[MessageExt]:
        """Send a refused batch back; the messages done with (the rest is retried here)."""
        if self._broadcasting:
            log.warning("broadcast messages %s not consumed: dropped, as RocketMQ does",
                        [m.msg_id for m in batch])
            return batch
        # a message the expiry already sent back is not sent twice
        pending = [m for m in batch if work.pq.contains(m)]
        sent = await asyncio.gather(*(self._send_back(m, 0) for m in pending))
        failed = [m for m, ok in zip(pending, sent) if not ok]
        if failed:
            self._retry_later(work, failed)
        return [m for m in batch if not any(m is f for f in failed)]

    def _retry_later(self, work: QueueWork, msgs: list[MessageExt]) -> None:
        """Consume `msgs` here again after retry_delay_s (submitConsumeRequestLater)."""
        def fire() -> None:
            self._later.discard(handle)
            if not work.dropped:
                self._requests.put_nowait((work, msgs))
        handle = asyncio.get_running_loop().call_later(self._retry_delay_s, fire)
        self._later.add(handle)

    # ---------------------------------------------------------------- consumeTimeout
    async def _clean_expired_loop(self) -> None:
        while True:
            await asyncio.sleep(self._consume_timeout_s)
            for work in list(self._works()):
                try:
                    await self.clean_expired(work)
                except Exception:  # a bug here must not end the checks
                    log.exception("checking %s for expired messages failed", work.mq)

    async def clean_expired(self, work: QueueWork) -> None:
        """Send back the queue's head while its listener call is over consume_timeout_s old."""
        pq = work.pq
        for _ in range(_EXPIRED_PER_ROUND):
            msg = pq.expired_head(self._consume_timeout_s)
            if msg is None or work.dropped:
                return
            if not self._broadcasting and not await self._send_back(msg, EXPIRED_DELAY_LEVEL):
                return  # tried again next round
            log.info("message %s of %s consumed for over %s s: sent back", msg.msg_id, work.mq,
                     self._consume_timeout_s)
            if pq.contains(msg):
                offset = pq.remove([msg])
                if offset >= 0:
                    self._offset_moved(work, offset)
