"""kafka-python: the pure-Python Kafka client (its own protocol code, not librdkafka's)."""

from __future__ import annotations

import time
from importlib import metadata

from kafka import KafkaConsumer, KafkaProducer

from ..base import Client, Consume, In, Out
from . import kafka_common as kc


class KafkaPython(Client):
    name = "kafka-python"
    protocol = "kafka"
    lacks = dict(kc.LACKS)
    codecs = kc.CODECS

    def version(self) -> str:
        return metadata.version("kafka-python")

    def _conf(self, **extra: object) -> dict:
        conf = {"bootstrap_servers": self.ep.kafka, **extra}
        if self.creds:
            conf.update({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                         "sasl_plain_username": self.creds.user,
                         "sasl_plain_password": self.creds.secret})
        return conf

    def _send(self, producer: KafkaProducer, topic: str, msgs: list[Out]) -> None:
        futures = [producer.send(topic, m.body, key=m.key.encode() if m.key is not None else None,
                                 headers=kc.headers(m)) for m in msgs]
        producer.flush(60)
        for f in futures:
            f.get(30)  # raises the send's error

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        producer = KafkaProducer(**self._conf(compression_type=compression, linger_ms=5,
                                              max_request_size=kc.MAX_BYTES, request_timeout_ms=10000,
                                              max_block_ms=10000))
        try:
            self._send(producer, topic, msgs)
        finally:
            producer.close(10)

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        consumer = KafkaConsumer(**self._conf(group_id=group, auto_offset_reset="earliest",
                                              enable_auto_commit=False,
                                              isolation_level="read_committed",
                                              max_partition_fetch_bytes=kc.MAX_BYTES,
                                              fetch_max_bytes=kc.MAX_BYTES * 2, max_poll_records=100))
        consumer.subscribe([topic])
        got: list[In] = []
        started, last = time.monotonic(), None
        try:
            while not c.done(len(got), started, last):
                batch = consumer.poll(200, max_records=1 if c.n is not None and c.n < 100 else 100)
                if c.ready is not None and consumer.assignment():
                    c.ready.set()
                for records in batch.values():
                    for r in records:
                        got.append(kc.received(r.value, r.key, r.headers, r.timestamp))
                        last = time.monotonic()
            if got:
                consumer.commit()
        finally:
            consumer.close(autocommit=False)
        return got

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        producer = KafkaProducer(**self._conf(transactional_id=f"interop-{topic}"))
        try:
            producer.init_transactions()
            for msgs, end in ((commit, producer.commit_transaction), (abort, producer.abort_transaction)):
                producer.begin_transaction()
                self._send(producer, topic, msgs)
                end()
        finally:
            producer.close(10)


CLIENT = KafkaPython
