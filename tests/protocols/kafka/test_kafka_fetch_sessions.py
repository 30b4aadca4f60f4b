"""Incremental fetch sessions (KIP-227): kafka-python (which uses them) against a live broker,
the session errors and incremental answers on the wire, and the cache's bound and eviction."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.fetch_sessions import EVICTION_MS, FetchSessionCache
from rocketport.protocols.kafka.schema import ApiKey
from tests.protocols.kafka.kafka_raw import RawClient, encode_batch
from tests.protocols.kafka.test_confluent_kafka import create_topic
from tests.support.kafka import start_broker

TIMEOUT_S = 30
FETCH_V = 12


def fetch_body(session_id: int, epoch: int, partitions: dict[int, int] | None = None, topic: str = "fs",
               forget: list[int] | None = None, max_wait_ms: int = 0) -> dict:
    topics = [] if not partitions else [{"topic": topic, "partitions": [
        {"partition": p, "fetch_offset": off, "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, off in partitions.items()]}]
    return {"max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 24, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "topics": topics,
            "forgotten_topics_data": [{"topic": topic, "partitions": forget}] if forget else []}


def answered(response: dict) -> dict[int, int]:
    """partition -> records bytes of every partition in the answer."""
    return {p["partition_index"]: sum(len(bytes(r)) for r in (p["records"] or [])) if isinstance(p["records"], list)
            else len(bytes(p["records"] or b"")) for t in response["responses"] for p in t["partitions"]}


def produce_raw(raw: RawClient, partition: int, n: int = 1) -> None:
    out = raw.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "fs", "partition_data": [{"index": partition, "records": encode_batch([b"x"] * n)}]}]})
    assert out["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE


def test_kafka_python_fetches_through_a_session_and_misses_nothing(live_broker):
    create_topic(live_broker, "fs", 20)
    producer = KafkaProducer(bootstrap_servers=live_broker.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=live_broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition("fs", i) for i in range(20)])
        got: list[bytes] = []
        for round_ in range(3):  # each round after the first is read by incremental fetches
            for i in range(40):
                producer.send("fs", b"r%d-%d" % (round_, i), partition=(i * 7) % 20)
            producer.flush()
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 40 * (round_ + 1) and time.monotonic() < deadline:
                for msgs in consumer.poll(200).values():
                    got.extend(m.value for m in msgs)
        assert sorted(got) == sorted(b"r%d-%d" % (r, i) for r in range(3) for i in range(40))
        sessions = live_broker.server.front_ends["kafka"].handlers.fetch_sessions
        [session] = sessions.sessions.values()
        assert sessions.created == 1 and len(session.partitions) == 20 and session.epoch >= 3  # rounds 2, 3
    finally:
        consumer.close()
        producer.close()


def test_incremental_fetches_answer_only_what_changed_and_session_errors(live_broker):
    create_topic(live_broker, "fs", 4)
    with RawClient(live_broker.port) as raw:
        produce_raw(raw, 1, 3)
        full = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(0, 0, {0: 0, 1: 0, 2: 0, 3: 0}))
        session_id = full["session_id"]
        assert session_id != 0 and full["error_code"] == ErrorCode.NONE
        assert set(answered(full)) == {0, 1, 2, 3} and answered(full)[1] > 0
        # the client moves partition 1's offset on; nothing new anywhere: an empty answer
        quiet = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id, 1, {1: 3}))
        assert quiet["session_id"] == session_id and quiet["responses"] == []
        produce_raw(raw, 2)
        one = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id, 2))
        assert set(answered(one)) == {2} and answered(one)[2] > 0  # records and a moved watermark
        stale = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id, 2))
        assert (stale["error_code"], stale["responses"]) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
        unknown = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id + 1, 1))
        assert unknown["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # forgetting a partition: its news is no longer answered
        produce_raw(raw, 3)
        forgot = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id, 3, {2: 1}, forget=[3]))
        assert forgot["responses"] == []
        # a sessionless fetch naming the session closes it
        closing = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id, -1, {0: 0}))
        assert closing["session_id"] == 0 and set(answered(closing)) == {0}
        gone = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(session_id, 4))
        assert gone["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_no_slots_means_sessionless_answers(tmp_path):
    live = start_broker(str(tmp_path / "store"), kafka_max_incremental_fetch_session_cache_slots=0)
    try:
        create_topic(live, "fs", 2)
        with RawClient(live.port) as raw:
            full = raw.request(ApiKey.FETCH, FETCH_V, fetch_body(0, 0, {0: 0, 1: 0}))
            assert (full["error_code"], full["session_id"]) == (ErrorCode.NONE, 0)
            assert set(answered(full)) == {0, 1}
    finally:
        live.stop()


def test_the_cache_is_bounded_and_evicts_as_kafka_does():
    now = [0]
    cache = FetchSessionCache(max_slots=2, clock_ms=lambda: now[0])

    def open_session(partitions: int) -> int:
        body = fetch_body(0, 0, {p: 0 for p in range(partitions)})
        fetch = cache.begin(body)
        response = {"responses": [{"topic": "fs", "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 0, "last_stable_offset": 0,
             "log_start_offset": 0, "records": None} for p in range(partitions)]}], "session_id": 0}
        return cache.finish(fetch, response)["session_id"]

    small, big = open_session(1), open_session(5)
    assert small and big and open_session(10) == 0  # full, and nothing old enough to give way
    now[0] = EVICTION_MS + 1  # both past their protection: the smallest goes for a bigger one
    cache.begin(fetch_body(big, 1))  # big is used now; small is stale
    third = open_session(3)
    assert third and small not in cache.sessions and big in cache.sessions
    assert open_session(1) == 0  # not stale, and smaller than every evictable session
    now[0] = 3 * EVICTION_MS
    assert open_session(1) != 0 and len(cache) == 2  # a stale one gives way to anyone


def test_fetch_v13_names_topics_by_id_in_requests_sessions_and_answers(live_broker):
    create_topic(live_broker, "fs", 2)
    with RawClient(live_broker.port) as raw:
        produce_raw(raw, 0, 2)
        meta = raw.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": bytes(16), "name": "fs"}],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        topic_id = meta["topics"][0]["topic_id"]
        assert topic_id != bytes(16)
        stranger = bytes(range(16))

        def body(session_id: int, epoch: int, partitions: dict[int, int] | None, ids=(topic_id,)) -> dict:
            return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 24, "isolation_level": 0,
                    "session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [],
                    "topics": [{"topic_id": i, "partitions": [
                        {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
                        for p, o in (partitions or {}).items()]} for i in ids] if partitions else []}

        full = raw.request(ApiKey.FETCH, 16, body(0, 0, {0: 0, 1: 0}, ids=(topic_id, stranger)))
        by_id = {t["topic_id"]: t["partitions"] for t in full["responses"]}
        assert set(by_id) == {topic_id, stranger}
        assert {p["error_code"] for p in by_id[stranger]} == {ErrorCode.UNKNOWN_TOPIC_ID}
        assert [p["high_watermark"] for p in by_id[topic_id]] == [2, 0] and by_id[topic_id][0]["records"]
        produce_raw(raw, 1)
        news = raw.request(ApiKey.FETCH, 16, body(full["session_id"], 1, {0: 2}))
        assert [(t["topic_id"], [p["partition_index"] for p in t["partitions"]]) for t in news["responses"]] \
            == [(topic_id, [1])]
