"""One plain_acl.yml for every protocol: the same accounts and topic/group permissions
checked by remoting signatures (the native client), Kafka SASL PLAIN and SCRAM
(confluent-kafka), AMQP logins (pika) and STOMP logins (stomp.py), each refusing in its own
protocol's terms; the file re-read when it changes, without a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pika.exceptions import ChannelClosedByBroker, ProbableAuthenticationError

from rocketport.client import ClientError, Message
from rocketport.client import Producer as NativeProducer
from rocketport.core.auth.plain_acl import SUB, AclError, check_login
from rocketport.core.auth.scram import ScramCredentials
from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.protocols.remoting import ResponseCode
from tests.protocols.remoting.test_session import pull_request
from tests.protocols.stomp.stomp_support import connect as stomp_connect
from tests.protocols.stomp.stomp_support import stored
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.support.remoting import remoting_client

ACL = """\
accounts:
  - accessKey: writer
    secretKey: writer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB
  - accessKey: denied
    secretKey: denied-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - orders=DENY
  - accessKey: ops
    secretKey: ops-secret
    admin: true
"""
TOPICS = ("orders", "other")
WRITER = ("writer", "writer-secret")
DENIED = ("denied", "denied-secret")
TIMEOUT_S = 20.0


@pytest.fixture
def acl_broker(tmp_path) -> Iterator[tuple[LiveBroker, Path]]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    creds = str(tmp_path / "scram.json")
    ScramCredentials(creds).set("writer", "SCRAM-SHA-256", "writer-scram")
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1 << 20,
        default_topic_queue_nums=1, listen_port=0, namesrv=ProtocolConfig(True, 0, "127.0.0.1"),
        kafka=ProtocolConfig(True, 0, "127.0.0.1"), amqp=ProtocolConfig(True, 0, "127.0.0.1"),
        stomp=ProtocolConfig(True, 0, "127.0.0.1"), acl_enable=True, plain_acl_file=str(acl),
        kafka_sasl_mechanisms="PLAIN,SCRAM-SHA-256", kafka_scram_credential_file=creds)
    live = start_live_broker(config)
    try:
        for topic in TOPICS:
            live.run(lambda t=topic: live.server.broker.create_topic(t, read_queue_nums=1, write_queue_nums=1))
        yield live, acl
    finally:
        live.stop()


def _count(live: LiveBroker, topic: str) -> int:
    return len(stored(live, topic))


# -- Kafka ------------------------------------------------------------------------------------
def _kafka(live: LiveBroker, user: str, password: str, mechanism: str = "PLAIN", **extra) -> dict:
    return {"bootstrap.servers": live.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **extra}


def _kafka_produce(live: LiveBroker, topic: str, user: str, password: str, mechanism: str = "PLAIN") -> list:
    """The delivery errors (None: delivered) and the client's errors of one message."""
    outcome: list = []
    producer = Producer(_kafka(live, user, password, mechanism, **{
        "message.timeout.ms": 4000, "error_cb": outcome.append}))
    producer.produce(topic, b"k", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(8)
    return outcome


def _kafka_fetch_error(live: LiveBroker, user: str, password: str, *, subscribe: bool,
                       mechanism: str = "PLAIN") -> int | None:
    """The first error code a consumer of ``orders`` meets (None: it read a message)."""
    consumer = Consumer(_kafka(live, user, password, mechanism, **{
        "group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    try:
        if subscribe:
            consumer.subscribe(["orders"])
        else:
            consumer.assign([TopicPartition("orders", 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error().code() if msg.error() else None
        raise AssertionError("the consumer saw neither a message nor an error")
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism,password", [("PLAIN", "writer-secret"), ("SCRAM-SHA-256", "writer-scram")])
def test_kafka_pub_only_account_produces_but_cannot_consume(acl_broker, mechanism, password):
    live, _ = acl_broker
    assert _kafka_produce(live, "orders", "writer", password, mechanism) == [None]
    errors = [e for e in _kafka_produce(live, "other", "writer", password, mechanism) if e is not None]
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _count(live, "orders") == 1 and _count(live, "other") == 0
    assert _kafka_fetch_error(live, "writer", password, subscribe=False, mechanism=mechanism) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_deny_account_and_wrong_password(acl_broker):
    live, _ = acl_broker
    errors = [e for e in _kafka_produce(live, "orders", *DENIED) if e is not None]
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _kafka_fetch_error(live, *DENIED, subscribe=True) == KafkaError.GROUP_AUTHORIZATION_FAILED
    errors = _kafka_produce(live, "orders", "writer", "wrong-password")
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert _count(live, "orders") == 0


# -- AMQP -------------------------------------------------------------------------------------
def _amqp(live: LiveBroker, user: str, password: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", live.endpoint("amqp")[1], credentials=pika.PlainCredentials(user, password)))


def test_amqp_pub_only_deny_and_wrong_password(acl_broker):
    live, _ = acl_broker
    with _amqp(live, "ops", "ops-secret") as admin:
        for queue in TOPICS:
            admin.channel().queue_declare(queue, durable=True)
    with _amqp(live, *WRITER) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", "orders", b"from amqp")
        with pytest.raises(ChannelClosedByBroker) as refused:
            conn.channel().basic_get("orders")
        assert refused.value.reply_code == 403 and "ACCESS_REFUSED" in refused.value.reply_text
        with pytest.raises(ChannelClosedByBroker) as refused:
            ch.basic_publish("", "other", b"nope")
        assert refused.value.reply_code == 403
    with _amqp(live, *DENIED) as conn:
        for action in (lambda ch: ch.basic_publish("", "orders", b"nope"), lambda ch: ch.basic_get("orders")):
            ch = conn.channel()
            ch.confirm_delivery()
            with pytest.raises(ChannelClosedByBroker) as refused:
                action(ch)
            assert refused.value.reply_code == 403
    with pytest.raises(ProbableAuthenticationError):
        _amqp(live, "writer", "wrong-password")
    assert _count(live, "orders") == 1 and _count(live, "other") == 0


# -- STOMP ------------------------------------------------------------------------------------
def _stomp_error(listener) -> str:
    assert listener.wait(lambda: listener.errors, TIMEOUT_S)
    return listener.errors[0][0]["message"]


def test_stomp_pub_only_deny_and_wrong_password(acl_broker):
    live, _ = acl_broker
    conn, listener = stomp_connect(live, username="writer", passcode="writer-secret")
    conn.send("/queue/orders", b"from stomp", receipt="sent")
    listener.wait_receipt("sent")
    conn.subscribe("/queue/orders", id="s", receipt="sub")
    assert "No permission to subscribe: topic orders" in _stomp_error(listener)
    conn, listener = stomp_connect(live, username="writer", passcode="writer-secret")
    conn.send("/queue/other", b"nope", receipt="no")
    assert "No permission to send to topic other" in _stomp_error(listener)
    conn, listener = stomp_connect(live, username="denied", passcode="denied-secret")
    conn.send("/queue/orders", b"nope", receipt="no")
    assert "No permission to send to topic orders" in _stomp_error(listener)
    conn, listener = stomp_connect(live, username="denied", passcode="denied-secret")
    conn.subscribe("/queue/orders", id="s", receipt="sub")
    assert "No permission to subscribe" in _stomp_error(listener)
    with pytest.raises(Exception):  # stomp.py: the ERROR frame ends the CONNECT
        stomp_connect(live, username="writer", passcode="wrong-password")
    assert _count(live, "orders") == 1 and _count(live, "other") == 0


# -- remoting ---------------------------------------------------------------------------------
def _remoting_send(live: LiveBroker, topic: str, credentials: tuple[str, str]) -> str | None:
    """None when stored, else the refusal's remark."""
    async def send() -> str | None:
        async with NativeProducer(live.namesrv, "pg", credentials=credentials) as producer:
            try:
                await producer.send(Message(topic, b"from remoting"))
            except ClientError as exc:
                assert exc.code == ResponseCode.SYSTEM_ERROR  # RocketMQ 4.x answers AclException so
                return exc.remark
        return None
    return asyncio.run(asyncio.wait_for(send(), TIMEOUT_S))


def _remoting_pull(live: LiveBroker, credentials: tuple[str, str]) -> tuple[int, str]:
    async def pull() -> tuple[int, str]:
        async with remoting_client(live.addr, credentials=credentials) as client:
            resp = await client.invoke(pull_request("orders", 0, 0))
        return resp.code, resp.remark or ""
    return asyncio.run(asyncio.wait_for(pull(), TIMEOUT_S))


def test_remoting_pub_only_deny_and_wrong_secret(acl_broker):
    live, _ = acl_broker
    assert _remoting_send(live, "orders", WRITER) is None
    assert "No permission for topic other" in _remoting_send(live, "other", WRITER)
    code, remark = _remoting_pull(live, WRITER)
    assert code == ResponseCode.SYSTEM_ERROR and "No permission for topic orders" in remark
    assert "No permission for topic orders" in _remoting_send(live, "orders", DENIED)
    assert "No permission for topic orders" in _remoting_pull(live, DENIED)[1]
    assert "Check signature failed" in _remoting_send(live, "orders", ("writer", "wrong-password"))
    assert _count(live, "orders") == 1 and _count(live, "other") == 0


# -- HTTP (the console's basic auth calls check_login) ----------------------------------------
def test_check_login_for_basic_auth(acl_broker):
    live, _ = acl_broker
    acl = live.server.broker.acl
    assert check_login(acl, "ops", "ops-secret", admin=True).admin
    assert check_login(acl, "writer", "writer-secret", topic="orders", needed=1 << 2).access_key == "writer"
    for user, password, kwargs in [("writer", "writer-secret", {"topic": "orders", "needed": SUB}),
                                   ("writer", "writer-secret", {"admin": True}),
                                   ("denied", "denied-secret", {"group": "g"}),
                                   ("writer", "wrong-password", {}), ("nobody", "whatever", {})]:
        with pytest.raises(AclError):
            check_login(acl, user, password, **kwargs)


# -- one file, re-read ------------------------------------------------------------------------
def test_a_changed_file_applies_to_every_protocol_without_a_restart(acl_broker):
    live, acl = acl_broker
    assert _remoting_send(live, "orders", WRITER) is None
    stomp, listener = stomp_connect(live, username="writer", passcode="writer-secret")  # logged in before
    acl.write_text(ACL.replace("orders=PUB", "orders=PUB|SUB"))
    deadline = time.monotonic() + TIMEOUT_S
    while _remoting_pull(live, WRITER)[0] == ResponseCode.SYSTEM_ERROR:  # re-read within a second
        assert time.monotonic() < deadline, "the ACL file was not re-read"
        time.sleep(0.2)
    assert _kafka_fetch_error(live, *WRITER, subscribe=False) is None
    stomp.subscribe("/queue/orders", id="s", receipt="sub")
    listener.wait_receipt("sub")
    assert not listener.errors
    with _amqp(live, "ops", "ops-secret") as admin:
        admin.channel().queue_declare("orders", durable=True)
    with _amqp(live, *WRITER) as conn:
        conn.channel().basic_get("orders")  # no longer refused
    acl.write_text(ACL.replace("secretKey: writer-secret", "secretKey: rotated-secret"))
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        errors = _kafka_produce(live, "orders", *WRITER)
        if errors and errors[0] is not None and errors[0].code() == KafkaError._AUTHENTICATION:
            break
        assert time.monotonic() < deadline, "the old secret still logs in"
    assert _kafka_produce(live, "orders", "writer", "rotated-secret") == [None]
    with pytest.raises(ProbableAuthenticationError):
        _amqp(live, *WRITER)
