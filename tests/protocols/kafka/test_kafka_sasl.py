"""kafkaSaslMechanisms=PLAIN: SASL/PLAIN against the plain ACL accounts, and the accounts'
topic and group permissions, with confluent-kafka, kafka-python and raw frames (the v0
handshake's unframed tokens)."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.protocols.kafka.connection import KafkaServerConnection
from rocketport.protocols.kafka.events import SaslTokenReceived
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey

from tests.support.kafka import start_broker
from tests.support.live_broker import LiveBroker

from .kafka_raw import RawClient, encode_batch

ACL = """\
accounts:
  - accessKey: alice
    secretKey: alice-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - open=PUB|SUB
      - readonly=SUB
    groupPerms:
      - blocked=DENY
  - accessKey: root
    secretKey: root-secret
    admin: true
"""


@pytest.fixture
def sasl_broker(tmp_path) -> Iterator[LiveBroker]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    live = start_broker(str(tmp_path / "store"), kafka_sasl_mechanisms="PLAIN", plain_acl_file=str(acl))
    try:
        for topic in ("open", "readonly", "closed"):
            live.run(lambda t=topic: live.server.broker.create_topic(t, read_queue_nums=1, write_queue_nums=1))
        yield live
    finally:
        live.stop()


def stored(live: LiveBroker, topic: str) -> int:
    return live.run(live.server.broker.max_offset, topic, 0)


def sasl(live: LiveBroker, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": live.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}


def test_token_after_a_v0_handshake_is_unframed():
    conn = KafkaServerConnection()
    conn.expect_sasl_token()
    token = b"\0u\0p"  # shorter than any request header
    events = conn.receive_data(struct.pack(">i", len(token)) + token)
    assert events == [SaslTokenReceived(token)]
    assert conn.frame_sasl_token(b"") == b"\0\0\0\0"


def test_confluent_kafka_authenticates_and_permissions_apply(sasl_broker):
    confluent = pytest.importorskip("confluent_kafka")
    reports: list = []
    p = confluent.Producer(sasl(sasl_broker, "alice", "alice-secret", **{"message.timeout.ms": 10000}))
    for topic in ("open", "readonly", "closed"):
        p.produce(topic, b"v-" + topic.encode(), partition=0,
                  on_delivery=lambda err, msg: reports.append((msg.topic(), err)))
    assert p.flush(20) == 0
    errors = {topic: (err.code() if err else None) for topic, err in reports}
    assert errors == {"open": None, "readonly": confluent.KafkaError.TOPIC_AUTHORIZATION_FAILED,
                      "closed": confluent.KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert [stored(sasl_broker, t) for t in ("open", "readonly", "closed")] == [1, 0, 0]

    c = confluent.Consumer(sasl(sasl_broker, "alice", "alice-secret", **{
        "group.id": "readers", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    c.subscribe(["open"])
    deadline = time.monotonic() + 30
    got = None
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got = m.value()
    c.commit(asynchronous=False)
    c.close()
    assert got == b"v-open"

    denied = confluent.Consumer(sasl(sasl_broker, "alice", "alice-secret", **{
        "group.id": "blocked", "auto.offset.reset": "earliest"}))
    denied.subscribe(["open"])
    deadline = time.monotonic() + 30
    error = None
    while error is None and time.monotonic() < deadline:
        m = denied.poll(0.5)
        if m is not None and m.error():
            error = m.error().code()
    denied.close()
    assert error == confluent.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_wrong_password_and_missing_sasl_are_refused_and_store_nothing(sasl_broker):
    confluent = pytest.importorskip("confluent_kafka")
    errors: list = []
    p = confluent.Producer(sasl(sasl_broker, "alice", "not-it", **{
        "message.timeout.ms": 3000, "error_cb": lambda e: errors.append(e)}))
    p.produce("open", b"x")
    p.flush(6)
    assert any(e.code() == confluent.KafkaError._AUTHENTICATION and "Authentication failed" in e.str()
               for e in errors), errors
    # a client that skips SASL is cut off at its first request after ApiVersions
    with RawClient(sasl_broker.port) as raw:
        raw.send(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                     "topic_data": [{"name": "open", "partition_data": [
                                         {"index": 0, "records": encode_batch([b"sneaky"])}]}]})
        with pytest.raises(ConnectionError):
            raw.receive(ApiKey.PRODUCE, 9)
    assert stored(sasl_broker, "open") == 0


def test_kafka_python_authenticates_and_admin_needs_an_admin_account(sasl_broker):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic
    from kafka.errors import TopicAuthorizationFailedError

    common = {"bootstrap_servers": sasl_broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "PLAIN"}
    producer = kafka.KafkaProducer(sasl_plain_username="alice", sasl_plain_password="alice-secret", **common)
    producer.send("open", b"from kafka-python", partition=0).get(timeout=20)
    producer.close()
    assert stored(sasl_broker, "open") == 1
    admin = kafka.KafkaAdminClient(sasl_plain_username="alice", sasl_plain_password="alice-secret", **common)
    with pytest.raises(TopicAuthorizationFailedError):
        admin.create_topics([NewTopic("made", 1, 1)])
    admin.close()
    admin = kafka.KafkaAdminClient(sasl_plain_username="root", sasl_plain_password="root-secret", **common)
    admin.create_topics([NewTopic("made", 1, 1)])
    admin.close()
    assert sasl_broker.run(sasl_broker.server.broker.get_topic, "made") is not None


def raw_token_exchange(port: int, token: bytes) -> tuple[RawClient, bytes | None]:
    raw = RawClient(port)
    response = raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
    assert response == {"error_code": 0, "mechanisms": ["PLAIN"]}
    raw.sock.sendall(struct.pack(">i", len(token)) + token)
    try:
        (size,) = struct.unpack(">i", raw._read(4))
        return raw, raw._read(size)
    except ConnectionError:
        return raw, None


def test_v0_handshake_takes_a_raw_token_then_metadata_shows_permitted_topics_only(sasl_broker):
    raw, answer = raw_token_exchange(sasl_broker.port, b"\0alice\0alice-secret")
    with raw:
        assert answer == b""
        meta = raw.request(ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert sorted(t["name"] for t in meta["topics"]) == ["open", "readonly"]
        meta = raw.request(ApiKey.METADATA, 4, {"topics": [{"name": "closed"}], "allow_auto_topic_creation": True})
        assert meta["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    raw, answer = raw_token_exchange(sasl_broker.port, b"\0alice\0wrong")
    raw.sock.close()
    assert answer is None  # Kafka closes the connection after a failed v0 exchange
    with RawClient(sasl_broker.port) as late:  # out of order: authenticate before a handshake
        response = late.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert response["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_sasl_requests_on_a_plain_listener_name_no_mechanism(live_broker):
    with RawClient(live_broker.port) as raw:
        response = raw.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert response == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mechanism=st.text(max_size=20), token=st.binary(max_size=64))
def test_any_mechanism_and_token_is_answered_or_closes_only_that_connection(sasl_broker, mechanism, token):
    with RawClient(sasl_broker.port, timeout=5) as raw:
        try:
            shake = raw.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
            if shake["error_code"] == 0:
                answer = raw.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
                assert answer["error_code"] in (0, ErrorCode.SASL_AUTHENTICATION_FAILED)
            else:
                assert shake == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN"]}
        except ConnectionError:
            pass  # a refused token closes the connection, as Kafka does
    raw, answer = raw_token_exchange(sasl_broker.port, b"\0alice\0alice-secret")
    with raw:
        assert answer == b""  # the broker still serves
