"""Mutual TLS: the verified client certificate's subject (its CN) names the plain ACL
account, with that account's permissions, and no password: Kafka over SSL (its SSL
principal, beside SASL on the same port), AMQP's EXTERNAL mechanism (pika), STOMP without a
login (stomp.py), as RabbitMQ's ssl_cert_login, remoting requests sent unsigned (the native
client). The test CA's client certificate is CN=client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pika
import pytest
import stomp
from confluent_kafka import KafkaError, Producer
from pika.exceptions import ChannelClosedByBroker, ProbableAuthenticationError

from rocketport.protocols import tls
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.tls.certs import Pki, make_client_certificate
from tests.tls.conftest import tls_config
from tests.tls.test_tls_clients import TIMEOUT, client_context, kafka_ssl

ACL = """\
accounts:
  - accessKey: client
    secretKey: client-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB
  - accessKey: ops
    secretKey: ops-secret
    admin: true
"""


@pytest.fixture
def cert_broker(tmp_path, pki, monkeypatch) -> Iterator[LiveBroker]:
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", 2.0)
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    live = start_live_broker(tls_config(
        str(tmp_path / "store"), pki, tls_server_mode="enforcing", tls_server_need_client_auth="require",
        acl_enable=True, plain_acl_file=str(acl), kafka_sasl_mechanisms="PLAIN"))
    try:
        for topic in ("orders", "other"):
            live.run(lambda t=topic: live.server.broker.create_topic(t, read_queue_nums=1, write_queue_nums=1))
        yield live
    finally:
        live.stop()


def _kafka_produce(config: dict, topic: str) -> list:
    outcome: list = []
    producer = Producer({**config, "message.timeout.ms": 4000})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(8)
    return outcome


def test_kafka_ssl_principal_is_the_certificate_account(cert_broker, pki, tmp_path):
    config = kafka_ssl(cert_broker, pki, **{"ssl.certificate.location": pki.client_cert,
                                            "ssl.key.location": pki.client_key})
    assert _kafka_produce(config, "orders") == [None]  # no SASL: the certificate logged it in
    [err] = _kafka_produce(config, "other")
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # SASL_SSL on the same port: the SASL account replaces the certificate's
    sasl = {**config, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": "ops", "sasl.password": "ops-secret"}
    assert _kafka_produce(sasl, "other") == [None]
    # a certificate of the CA whose CN names no account: SASL is still required
    cert, key = make_client_certificate(pki, "nobody")
    nobody = kafka_ssl(cert_broker, pki, **{"ssl.certificate.location": cert, "ssl.key.location": key})
    [err] = _kafka_produce(nobody, "orders")
    assert err is not None


def _amqps(live: LiveBroker, pki: Pki, credentials, cert: str, key: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", live.endpoint("amqp (tls)")[1], credentials=credentials,
        ssl_options=pika.SSLOptions(client_context(pki, cert, key), "localhost")))


def test_amqp_external_logs_in_as_the_certificate_account(cert_broker, pki):
    with _amqps(cert_broker, pki, pika.PlainCredentials("ops", "ops-secret"), pki.client_cert, pki.client_key) as ops:
        for queue in ("orders", "other"):
            ops.channel().queue_declare(queue, durable=True)
    with _amqps(cert_broker, pki, pika.credentials.ExternalCredentials(), pki.client_cert, pki.client_key) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", "orders", b"by certificate")
        with pytest.raises(ChannelClosedByBroker) as refused:
            ch.basic_publish("", "other", b"no")
        assert refused.value.reply_code == 403
        with pytest.raises(ChannelClosedByBroker) as refused:
            conn.channel().basic_get("orders")  # PUB only
        assert refused.value.reply_code == 403
    cert, key = make_client_certificate(pki, "nobody")
    with pytest.raises(ProbableAuthenticationError):
        _amqps(cert_broker, pki, pika.credentials.ExternalCredentials(), cert, key)


class _Recorder(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.receipts: list[str] = []
        self.errors: list[str] = []

    def on_receipt(self, frame) -> None:
        self.receipts.append(frame.headers["receipt-id"])

    def on_error(self, frame) -> None:
        self.errors.append(frame.headers.get("message", ""))


def _stomp(live: LiveBroker, pki: Pki, cert: str, key: str) -> tuple[stomp.Connection12, _Recorder]:
    port = live.endpoint("stomp (tls)")[1]
    conn = stomp.Connection12([("127.0.0.1", port)], timeout=TIMEOUT, heartbeats=(0, 0))
    conn.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=pki.ca, cert_file=cert, key_file=key)
    recorder = _Recorder()
    conn.set_listener("t", recorder)
    conn.connect(wait=True)  # no login, no passcode
    return conn, recorder


def _wait(predicate) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_stomp_connect_without_a_login_is_the_certificate_account(cert_broker, pki):
    conn, recorder = _stomp(cert_broker, pki, pki.client_cert, pki.client_key)
    conn.send("/queue/orders", "by certificate", receipt="ok")
    _wait(lambda: "ok" in recorder.receipts)
    conn.send("/queue/other", "no", receipt="no")
    _wait(lambda: recorder.errors)
    assert "No permission to send to topic other" in recorder.errors[0]
    cert, key = make_client_certificate(pki, "nobody")
    with pytest.raises(stomp.exception.ConnectFailedException):
        _stomp(cert_broker, pki, cert, key)



def test_remoting_unsigned_requests_are_the_certificate_account(cert_broker, pki):
    from rocketport.client import ClientError, Message
    from rocketport.client import Producer as NativeProducer

    async def send(topic: str, cert: str, key: str) -> str | None:
        context = client_context(pki, cert, key)
        async with NativeProducer(cert_broker.namesrv, "cert-producer", tls=context) as producer:  # no credentials
            try:
                await producer.send(Message(topic, b"by certificate"))
            except ClientError as exc:
                return exc.remark
        return None

    assert asyncio.run(asyncio.wait_for(send("orders", pki.client_cert, pki.client_key), TIMEOUT)) is None
    remark = asyncio.run(asyncio.wait_for(send("other", pki.client_cert, pki.client_key), TIMEOUT))
    assert "No permission for topic other (accessKey=client)" in remark
    cert, key = make_client_certificate(pki, "nobody")
    remark = asyncio.run(asyncio.wait_for(send("orders", cert, key), TIMEOUT))
    assert "No acl config for the client certificate's CN=nobody" in remark
