"""confluent-kafka (librdkafka): the Kafka client most Python, Go, .NET and C users run."""

from __future__ import annotations

import time
from importlib import metadata

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer

from ..base import Client, Consume, In, Out
from . import kafka_common as kc


class ConfluentKafka(Client):
    name = "confluent-kafka"
    protocol = "kafka"
    lacks = dict(kc.LACKS)
    codecs = kc.CODECS

    def version(self) -> str:
        return f"{metadata.version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]})"

    def _conf(self, **extra: object) -> dict:
        conf = {"bootstrap.servers": self.ep.kafka, **extra}
        if self.creds:
            conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                         "sasl.username": self.creds.user, "sasl.password": self.creds.secret})
        return conf

    def _send(self, producer: Producer, topic: str, msgs: list[Out]) -> list[str]:
        errors: list[str] = []

        def report(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))

        for m in msgs:
            while True:
                try:
                    producer.produce(topic, m.body, key=m.key, headers=kc.headers(m), on_delivery=report)
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    producer.poll(0.1)
        return errors

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        producer = Producer(self._conf(**{"compression.type": compression or "none",
                                          "message.max.bytes": kc.MAX_BYTES, "linger.ms": 5,
                                          "message.timeout.ms": 15000, "enable.idempotence": True}))
        errors = self._send(producer, topic, msgs)
        left = producer.flush(30)
        if errors or left:
            raise RuntimeError(f"{len(errors)} delivery errors ({errors[:1]}), {left} unacknowledged")

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        consumer = Consumer(self._conf(**{"group.id": group, "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False,
                                          "isolation.level": "read_committed",
                                          "fetch.message.max.bytes": kc.MAX_BYTES}))

        def assigned(_consumer, _partitions) -> None:
            if c.ready is not None:
                c.ready.set()

        consumer.subscribe([topic], on_assign=assigned)
        got: list[In] = []
        started, last = time.monotonic(), None
        try:
            while not c.done(len(got), started, last):
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().fatal():
                        raise KafkaException(msg.error())
                    continue
                got.append(kc.received(msg.value(), msg.key(), msg.headers(), msg.timestamp()[1]))
                last = time.monotonic()
            if got:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return got

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        producer = Producer(self._conf(**{"transactional.id": f"interop-{topic}"}))
        producer.init_transactions(30)
        for msgs, end in ((commit, producer.commit_transaction), (abort, producer.abort_transaction)):
            producer.begin_transaction()
            errors = self._send(producer, topic, msgs)
            producer.flush(30)
            if errors:
                raise RuntimeError(f"transactional send failed: {errors[0]}")
            end(30)


CLIENT = ConfluentKafka
