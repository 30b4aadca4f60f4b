"""A consume-transform-produce worker, exactly-once, for the SIGKILL test (a real process):
reads ``eos-in`` in group ``eos`` (read_committed), writes each record upper-cased to
``eos-out`` keyed by its input offset, in one transaction per batch with the batch's
offsets; prints ``open N`` once a transaction's records are stored and ``committed N``
after each commit; exits once it has committed ``total``.

Run as ``python -m tests.protocols.kafka.eos_worker BOOTSTRAP TOTAL``."""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT_S = 30
BATCH = 50
DEADLINE_S = 120


def main() -> None:
    bootstrap, total = sys.argv[1], int(sys.argv[2])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-worker", "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)  # fences a killed predecessor, aborting its transaction
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "session.timeout.ms": 3000, "heartbeat.interval.ms": 500})
    consumer.subscribe(["eos-in"])
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(num_messages=BATCH, timeout=0.5) if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("eos-out", key=str(m.offset()).encode(), value=m.value().upper(), partition=0)
        producer.flush(TIMEOUT_S)
        print(f"open {msgs[0].offset()}", flush=True)  # stored, not committed: the test kills here
        time.sleep(0.05)
        producer.send_offsets_to_transaction([TopicPartition("eos-in", 0, msgs[-1].offset() + 1)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        print(f"committed {msgs[-1].offset() + 1}", flush=True)
        if msgs[-1].offset() + 1 >= total:
            break
    consumer.close()


if __name__ == "__main__":
    main()
