"""Kafka's acks under SYNC_MASTER, through confluent-kafka against real processes: acks=all
is answered once the slave holds the batch, and with the slave gone it fails with
NOT_ENOUGH_REPLICAS_AFTER_APPEND (the batch stays stored on the master) while acks=1 is
answered without the slave, as a Kafka leader answers them."""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer

from tests.ha.cluster import master_and_slave, wait_for
from tests.ha.test_sync_master import in_sync, runtime

TOPIC = "HaKafka"


def produce(port: int, acks: str, values: list[bytes]) -> list[KafkaError | None]:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": acks, "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 20000, "linger.ms": 0})
    errors: list[KafkaError | None] = []
    for value in values:
        producer.produce(TOPIC, value, partition=0, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)
    assert producer.flush(30) == 0
    return errors


def test_acks_all_waits_for_the_slave_and_acks_1_does_not(tmp_path, namesrv):
    master, slave = master_and_slave(tmp_path, namesrv, flush="ASYNC_FLUSH", kafka=True)
    master.broker.start()
    slave.broker.start()
    try:
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")
        assert produce(master.kafka_port, "all", [b"a-%d" % i for i in range(20)]) == [None] * 20
        # answered: the slave had it then (nothing else writes to this master)
        end = int(runtime(master.addr)["commitLogMaxOffset"])
        assert int(runtime(slave.addr)["haSlaveOffset"]) == end
        slave.broker.kill()
        wait_for(lambda: not in_sync(master.addr), what="the master to see the slave gone")
        errors = produce(master.kafka_port, "all", [b"alone"])
        assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND], errors
        assert int(runtime(master.addr)["commitLogMaxOffset"]) > end  # stored all the same
        assert produce(master.kafka_port, "1", [b"leader only"]) == [None]
    finally:
        slave.broker.stop()
        master.broker.stop()
