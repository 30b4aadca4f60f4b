"""Fetch response sizing and pacing.

Sizes: a response never carries more than ``max_bytes`` in all, nor more than a partition's
``partition_max_bytes`` for it (counted in the batch bytes sent, whole batches only), except
that the first batch of the first partition with data is always sent whole (Kafka's KIP-74
rule, so a consumer gets past a batch larger than its limits).

Pacing: a connection whose client stalls (a partition left with data behind is fetched
again 0.5-5 s later, as librdkafka does for fetch.queue.backoff.ms when its queue is full)
gets its responses paced below the rate that filled it; other connections never are.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from rocketport.common.batch import iter_records
from rocketport.common.batch.record_batch import split_batches
from rocketport.common.message import Message
from rocketport.protocols.kafka.fetch import FetchPacer
from rocketport.protocols.kafka.schema import ApiKey
from tests.support.live_broker import LiveBroker

from .kafka_raw import FETCH_V, RawClient, encode_batch

BATCH_VALUES = 10  # records per produced batch
VALUE = 90  # bytes per value


def create_topic(live: LiveBroker, name: str, partitions: int) -> None:
    live.run(lambda: live.server.broker.create_topic(name, read_queue_nums=partitions,
                                                     write_queue_nums=partitions))


def fetch(client: RawClient, topic: str, offsets: list[int], partition_max: int, max_bytes: int
          ) -> list[dict[str, Any]]:
    body = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": partition_max}
                for p, o in enumerate(offsets)]}]}
    return client.request(ApiKey.FETCH, FETCH_V, body)["responses"][0]["partitions"]


def batches(part: dict[str, Any]) -> list[bytes]:
    """The partition's batches; every one must be whole."""
    blob = bytes(part["records"] or b"")
    out, end = [], 0
    for at, size in split_batches(blob):
        out.append(blob[at:at + size])
        end = at + size
    assert end == len(blob), "a partial batch was sent"
    return out


@pytest.fixture
def sized(live_broker):
    """Topic 'sz': 3 partitions of 4 batches each; partition 1's first batch is 3x larger."""
    create_topic(live_broker, "sz", 3)
    with RawClient(live_broker.port) as client:
        for p in range(3):
            for i in range(4):
                n = BATCH_VALUES * (3 if p == 1 and i == 0 else 1)
                assert client.produce("sz", p, encode_batch([bytes(VALUE)] * n))[0] == 0
        one = len(batches(fetch(client, "sz", [0, 0, 0], 1, 1 << 20)[0])[0])  # one small batch
        yield live_broker, client, one


def test_partition_max_bytes_whole_batches_only(sized):
    _, client, one = sized
    parts = fetch(client, "sz", [0, 0, 0], 2 * one + one // 2, 1 << 20)
    # partition 1's first batch is over its limit and partition 0 came first: nothing this time
    assert [len(batches(p)) for p in parts] == [2, 0, 2]
    assert len(bytes(parts[0]["records"])) == len(bytes(parts[2]["records"])) == 2 * one
    parts = fetch(client, "sz", [0, 0, 0], one, 1 << 20)
    assert [len(batches(p)) for p in parts] == [1, 0, 1]
    # once past it, partition 1 is read as the others
    parts = fetch(client, "sz", [0, 3 * BATCH_VALUES, 0], 2 * one + one // 2, 1 << 20)
    assert [len(batches(p)) for p in parts] == [2, 2, 2]
    assert all(p["high_watermark"] == (4 * BATCH_VALUES + (2 * BATCH_VALUES if i == 1 else 0))
               for i, p in enumerate(parts))


def test_first_batch_of_the_first_partition_with_data_is_whole(sized):
    _, client, one = sized
    # partition 0 is at its end (no data): partition 1 is the first with data, and its
    # first batch (3x the limit) still comes whole; partition 2's does not fit
    parts = fetch(client, "sz", [4 * BATCH_VALUES, 0, 0], 10, 1 << 20)
    assert [len(batches(p)) for p in parts] == [0, 1, 0]
    assert sum(1 for _ in iter_records(bytes(parts[1]["records"]))) == 3 * BATCH_VALUES
    # a limit smaller than any batch: only the first partition's first batch
    parts = fetch(client, "sz", [0, 0, 0], 10, 10)
    assert [len(batches(p)) for p in parts] == [1, 0, 0]


def test_max_bytes_bounds_the_whole_response(sized):
    _, client, one = sized
    for max_bytes in (one, 3 * one + one // 2, 5 * one, 7 * one + 1):
        parts = fetch(client, "sz", [0, 0, 0], 1 << 20, max_bytes)
        sizes = [len(bytes(p["records"] or b"")) for p in parts]
        assert sum(sizes) <= max_bytes
        assert all(len(b) for p in parts for b in batches(p))
        assert sizes[0] == min(4, max_bytes // one) * one
    # offsets are reported for every partition, even those the budget left out
    parts = fetch(client, "sz", [0, 0, 0], 1 << 20, one)
    assert [p["high_watermark"] for p in parts] == [40, 60, 40]


def test_plain_records_honour_the_limits(live_broker):
    """Messages stored by another protocol: each run is encoded as one batch, sent only if it fits."""
    create_topic(live_broker, "plain", 1)
    broker = live_broker.server.broker
    for i in range(50):
        live_broker.call(broker.put_message(Message("plain", b"v%02d" % i + bytes(VALUE), {"k": "v"}, queue_id=0)))
    with RawClient(live_broker.port) as client:
        offset, seen = 0, []
        while offset < 50:
            part = fetch(client, "plain", [offset], 1000, 1 << 20)[0]
            assert len(bytes(part["records"])) <= 1000
            got = [r for b in batches(part) for r in iter_records(b)]
            assert got, "no progress"
            seen += [r.value[:3] for r in got]
            offset = int(got[-1].value[1:3]) + 1
        assert seen == [b"v%02d" % i for i in range(50)]


# --------------------------------------------------------------------------- pacing
def burst(pacer: FetchPacer, start: float, responses: int, records: int, every: float) -> float:
    """``responses`` responses of ``records`` each, ``every`` seconds apart, each leaving data
    behind on partition 0; returns when the last went out."""
    t = start
    for i in range(responses):
        t = start + i * every
        pacer.hold(request(i * records), t)
        pacer.answered(t, records, [("t", 0, (i + 1) * records)])
    return t


def request(offset: int) -> dict[str, Any]:
    return {"topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": offset}]}]}


def test_a_client_that_fetches_again_at_once_is_never_paced():
    pacer = FetchPacer()
    last = burst(pacer, 0.0, 50, 10_000, 0.01)  # a tuned client: 10 ms queue backoffs at most
    assert pacer.hold(request(500_000), last + 0.01) == 0.0
    assert pacer.rate is None
    # a long pause (a restart, a paused partition) is not a queue backoff either
    assert pacer.hold(request(500_000), last + 30.0) == 0.0
    assert pacer.rate is None


def test_a_stall_paces_below_the_rate_that_filled_the_client():
    pacer = FetchPacer()
    last = burst(pacer, 0.0, 4, 30_000, 0.05)  # 90,000 records in 0.15 s after the first
    resume = last + 1.0  # librdkafka's default fetch.queue.backoff.ms
    assert pacer.hold(request(120_000), resume) == 0.0
    assert pacer.rate == pytest.approx(0.7 * 90_000 / 0.15)
    pacer.answered(resume, 42_000, [("t", 0, 162_000)])  # 0.1 s worth at that rate
    delay = pacer.hold(request(162_000), resume + 0.01)
    assert delay == pytest.approx(0.09)
    assert pacer.rate > 0.7 * 90_000 / 0.15  # held back, so the rate grows ...
    assert pacer.filled == pytest.approx(90_000 / 0.15)
    near = pacer.rate = 0.85 * pacer.filled  # ... slowly once near the rate that filled the client
    pacer.answered(resume + 0.02, 1000, [("t", 0, 163_000)])
    pacer.grown_at = resume + 0.02
    pacer.hold(request(163_000), resume + 0.021)
    assert pacer.rate == pytest.approx(near * (1 + 0.03 * 0.001))
    # another stall lowers the rate again, from where it was
    rate = pacer.rate
    pacer.answered(resume + 0.1, 1000, [("t", 0, 164_000)])
    pacer.hold(request(164_000), resume + 1.2)
    assert pacer.rate == pytest.approx(0.7 * min(rate, 43_000 / 0.1))


def test_a_stalled_raw_client_is_paced_and_reads_everything(live_broker):
    """End to end: a client that leaves a partition alone for 0.6 s with data behind gets a
    pace; the data still arrives whole and in order."""
    create_topic(live_broker, "pace", 1)
    with RawClient(live_broker.port) as client:
        for i in range(20):
            assert client.produce("pace", 0, encode_batch([b"%04d" % (i * 10 + j) for j in range(10)]))[0] == 0
        offset, seen = 0, []

        def step() -> None:
            nonlocal offset
            part = fetch(client, "pace", [offset], 200, 1 << 20)[0]
            got = [r.value for b in batches(part) for r in iter_records(b)]
            seen.extend(got)
            offset += len(got)

        for _ in range(3):
            step()
        time.sleep(0.6)
        step()
        pacers = live_broker.run(lambda: list(live_broker.server.front_ends["kafka"].handlers.fetch._pacers.values()))
        assert [p.rate is not None for p in pacers] == [True]
        while offset < 200:
            step()
        assert seen == [b"%04d" % i for i in range(200)]
