"""rocketport.client: the project's own RocketMQ 4.x client (asyncio, driven here through its
blocking wrapper rocketport.client.sync)."""

from __future__ import annotations

import threading
import time
import zlib

from rocketport import __version__
from rocketport.client.sync import (
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)

from ..base import Client, Consume, In, Out
from ..broker import DELAY_LEVEL_OF
from . import remoting_common as rc


def _message(topic: str, m: Out) -> Message:
    return Message(topic, m.body, tags=m.tag, keys=m.key, properties=dict(m.props) or None,
                   delay_level=DELAY_LEVEL_OF[m.delay_s] if m.delay_s else None)


def _by_key(queues, msg: Message, arg):
    return queues[zlib.crc32(arg.encode()) % len(queues)]


def _received(msg: MessageExt) -> In:
    return In(body=msg.body, key=" ".join(msg.keys) or None, tag=msg.tags,
              props=dict(msg.properties), timestamp_ms=msg.born_timestamp,
              redelivered=msg.reconsume_times > 0)


class Native(Client):
    name = "rocketport.client"
    protocol = "remoting"
    codecs = rc.CODECS

    def version(self) -> str:
        return __version__

    def _credentials(self) -> tuple[str, str] | None:
        """(access key, secret key): every request signed, as RocketMQ's AclClientRPCHook."""
        return (self.creds.user, self.creds.secret) if self.creds else None

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        with Producer(self.ep.namesrv, f"PG_{topic}", credentials=self._credentials()) as producer:
            if len(msgs) > 100:  # the burst: batches of 100
                for i in range(0, len(msgs), 100):
                    producer.send_batch([_message(topic, m) for m in msgs[i:i + 100]])
                return
            for m in msgs:
                if ordered:
                    producer.send(_message(topic, m), selector=_by_key, arg=m.key or "")
                else:
                    producer.send(_message(topic, m))

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        got: list[In] = []
        lock = threading.Lock()
        last: list[float] = []

        def listener(msgs: list[MessageExt]) -> ConsumeResult:
            with lock:
                if c.n is not None and len(got) + len(msgs) > c.n:
                    return ConsumeResult.RECONSUME_LATER  # beyond N: left for the next consumer
                got.extend(_received(m) for m in msgs)
                last[:] = [time.monotonic()]
            return ConsumeResult.RECONSUME_LATER if c.nack else ConsumeResult.SUCCESS

        consumer = PushConsumer(group, self.ep.namesrv, consume_from="first", orderly=c.orderly,
                                rebalance_interval_s=2.0, credentials=self._credentials())
        consumer.subscribe(topic, c.tag_filter or "*", sql=c.sql)
        consumer.register(listener)
        consumer.start()
        if c.ready is not None:
            c.ready.set()
        started = time.monotonic()
        try:
            while True:
                with lock:
                    if c.done(len(got), started, last[0] if last else None):
                        break
                time.sleep(0.05)
        finally:
            consumer.shutdown()  # persists the consumed offsets
        with lock:
            return list(got)

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        def execute(_msg: Message, arg: LocalTransactionState) -> LocalTransactionState:
            return arg

        def check(_msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.ROLLBACK

        with TransactionProducer(self.ep.namesrv, f"TPG_{topic}", execute=execute,
                                 check=check) as producer:
            for msgs, state in ((commit, LocalTransactionState.COMMIT),
                                (abort, LocalTransactionState.ROLLBACK)):
                for m in msgs:
                    producer.send_in_transaction(_message(topic, m), state)


CLIENT = Native
