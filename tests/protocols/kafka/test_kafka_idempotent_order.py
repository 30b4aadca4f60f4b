"""Pipelined Produce requests of an idempotent producer are stored in request order under
SYNC_FLUSH: a later request never overtakes an earlier one's later partitions while the
earlier waits for its fsync. (Found by the Java transactional producer's crash test: its
next batch looked like a gap, OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the client.)"""

from __future__ import annotations

from rocketport.protocols.kafka.schema import ApiKey

from tests.support.kafka import start_broker

from .kafka_raw import PRODUCE_V, RawClient, encode_batch


def test_a_pipelined_request_never_overtakes_an_earlier_ones_partitions(tmp_path):
    live = start_broker(str(tmp_path / "store"), flush_disk_type="SYNC_FLUSH")
    try:
        live.run(lambda: live.server.broker.create_topic("order", read_queue_nums=2, write_queue_nums=2))
        with RawClient(live.port) as client:
            pid, epoch = client.init_producer_id()

            def batch(seq: int, count: int) -> bytes:
                return encode_batch([b"v%d" % (seq + i) for i in range(count)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq)

            for r in range(20):
                # the first request writes partition 0 (its fsync is awaited) and then 1; the
                # second, in the same write, writes partition 1's next batch
                first, first_frame = client.frame(ApiKey.PRODUCE, PRODUCE_V, {
                    "transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                        {"name": "order", "partition_data": [{"index": 0, "records": batch(r, 1)},
                                                             {"index": 1, "records": batch(3 * r, 1)}]}]})
                then, then_frame = client.frame(ApiKey.PRODUCE, PRODUCE_V,
                                                client.produce_body("order", 1, batch(3 * r + 1, 2), -1))
                client.sock.sendall(first_frame + then_frame)
                answers = dict(client.receive(ApiKey.PRODUCE, PRODUCE_V) for _ in range(2))
                p0, p1 = answers[first]["responses"][0]["partition_responses"]
                (later,) = answers[then]["responses"][0]["partition_responses"]
                assert (p0["error_code"], p1["error_code"], later["error_code"]) == (0, 0, 0)
                assert (p0["base_offset"], p1["base_offset"], later["base_offset"]) == (r, 3 * r, 3 * r + 1)
    finally:
        live.stop()
