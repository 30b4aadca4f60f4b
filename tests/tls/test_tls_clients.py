"""Real clients over TLS against every listener's TLS port, and the refusals: a plaintext
client on a TLS port, a stalled handshake, a missing or foreign client certificate."""

from __future__ import annotations

import socket
import subprocess
import ssl
import time
import urllib.request

import pika
import pytest
import stomp
from confluent_kafka import Consumer, KafkaException, Producer
from websockets.sync.client import connect as ws_connect

from tests.support.live_broker import LiveBroker
from tests.tls.certs import Pki
from tests.tls.conftest import HANDSHAKE_TIMEOUT_S

TIMEOUT = 20.0


def client_context(pki: Pki, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca)
    if cert:
        context.load_cert_chain(cert, key)
    return context


def kafka_ssl(live: LiveBroker, pki: Pki, **extra) -> dict:
    return {"bootstrap.servers": "127.0.0.1:%d" % live.endpoint("kafka (tls)")[1],
            "security.protocol": "SSL", "ssl.ca.location": pki.ca, **extra}


def produce_and_consume(config: dict, topic: str) -> list[bytes]:
    producer = Producer({**config, "message.timeout.ms": 10_000})
    for i in range(3):
        producer.produce(topic, b"m%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value())
    consumer.close()
    return sorted(got)


def test_confluent_kafka_over_ssl(tls_broker, pki):
    assert produce_and_consume(kafka_ssl(tls_broker, pki), "tls-topic") == [b"m0", b"m1", b"m2"]


def test_kafka_metadata_over_ssl_names_the_tls_port(tls_broker, pki):
    from confluent_kafka.admin import AdminClient
    metadata = AdminClient(kafka_ssl(tls_broker, pki)).list_topics(timeout=10)
    assert [b.port for b in metadata.brokers.values()] == [tls_broker.endpoint("kafka (tls)")[1]]


def test_kafka_python_over_ssl(tls_broker, pki):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers="127.0.0.1:%d" % tls_broker.endpoint("kafka (tls)")[1],
                             security_protocol="SSL", ssl_cafile=pki.ca, request_timeout_ms=10_000)
    producer.send("kp-tls", b"hello").get(timeout=15)
    producer.close(5)
    assert tls_broker.run(lambda: tls_broker.server.broker.topic_names()) and True


def test_pika_amqps(tls_broker, pki):
    params = pika.ConnectionParameters("127.0.0.1", tls_broker.endpoint("amqp (tls)")[1],
                                       ssl_options=pika.SSLOptions(client_context(pki), "localhost"))
    with pika.BlockingConnection(params) as connection:
        channel = connection.channel()
        channel.queue_declare("q-tls")
        channel.basic_publish("", "q-tls", b"over amqps")
        deadline = time.monotonic() + TIMEOUT
        body = None
        while body is None and time.monotonic() < deadline:
            _, _, body = channel.basic_get("q-tls", auto_ack=True)
        assert body == b"over amqps"


def test_stomp_py_over_tls(tls_broker, pki):
    port = tls_broker.endpoint("stomp (tls)")[1]
    conn = stomp.Connection12([("127.0.0.1", port)], timeout=TIMEOUT, heartbeats=(0, 0))
    conn.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=pki.ca)
    received: list[bytes] = []

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame) -> None:
            received.append(frame.body)

    conn.set_listener("t", Listener())
    conn.connect(wait=True)
    conn.subscribe("/queue/stomp-tls", id="1")
    conn.send("/queue/stomp-tls", "over tls")
    deadline = time.monotonic() + TIMEOUT
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    conn.disconnect()
    assert received == ["over tls"] or received == [b"over tls"]


def test_websockets_wss(tls_broker, pki):
    port = tls_broker.endpoint("stomp (websocket) (tls)")[1]
    with ws_connect(f"wss://localhost:{port}/ws", subprotocols=["v12.stomp"],
                    ssl=client_context(pki)) as ws:
        ws.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        assert ws.recv(timeout=10)[:9] in (b"CONNECTED", "CONNECTED")


def test_https_metrics(tls_broker, pki):
    port = tls_broker.endpoint("http (tls)")[1]
    with urllib.request.urlopen(f"https://localhost:{port}/metrics", context=client_context(pki),
                                timeout=10) as answer:
        assert answer.status == 200


def _remoting_heartbeat(sock: socket.socket) -> bytes:
    """A HEART_BEAT (code 34) request frame and the frame answering it."""
    import json
    import struct
    header = json.dumps({"code": 34, "language": "PYTHON", "version": 0, "opaque": 1, "flag": 0,
                         "extFields": {}}).encode()
    sock.sendall(struct.pack(">II", 4 + len(header), len(header)) + header)
    length = struct.unpack(">I", _exactly(sock, 4))[0]
    return _exactly(sock, length)


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "closed"
        out += chunk
    return out


def test_remoting_permissive_serves_tls_and_plaintext_on_one_port(tls_broker, pki):
    host, port = tls_broker.endpoint("broker (remoting)")
    with socket.create_connection((host, port), timeout=10) as plain:
        assert b'"opaque":1' in _remoting_heartbeat(plain)
    with socket.create_connection((host, port), timeout=10) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        assert b'"opaque":1' in _remoting_heartbeat(tls)
    host, port = tls_broker.endpoint("name server")
    with socket.create_connection((host, port), timeout=10) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as tls:
        assert b'"opaque":1' in _remoting_heartbeat(tls)


def _still_serves(live: LiveBroker, pki: Pki) -> None:
    port = live.endpoint("kafka (tls)")[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() is not None


def test_a_plaintext_client_on_a_tls_port_is_refused(tls_broker, pki, caplog):
    port = tls_broker.endpoint("kafka (tls)")[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:
        plain.sendall(b"\x00\x00\x00\x0a" + b"\x00" * 10)
        assert plain.recv(100) == b""  # closed, no answer
    assert any("plaintext client on a TLS port" in r.getMessage() for r in caplog.records)
    _still_serves(tls_broker, pki)


def test_a_stalled_handshake_is_closed_after_the_timeout(tls_broker, pki, caplog):
    port = tls_broker.endpoint("amqp (tls)")[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as idle:
        started = time.monotonic()
        assert idle.recv(100) == b""
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT_S + 3
    with socket.create_connection(("127.0.0.1", port), timeout=10) as half:
        half.sendall(b"\x16\x03\x01\x00\x50")  # a ClientHello record header, then nothing
        started = time.monotonic()
        try:
            assert half.recv(100) == b""
        except ConnectionResetError:
            pass
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT_S + 3
    assert any("TLS handshake" in r.getMessage() for r in caplog.records)
    _still_serves(tls_broker, pki)


def _mtls_handshake(live: LiveBroker, context: ssl.SSLContext) -> bytes:
    """Connect to the enforcing remoting port and ask for a heartbeat (TLS 1.3 reports a
    refused client certificate only on the first read)."""
    host, port = live.endpoint("broker (remoting)")
    with socket.create_connection((host, port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return _remoting_heartbeat(tls)


def test_mutual_tls_takes_a_client_certificate_of_the_ca(mtls_broker, pki):
    assert b'"opaque":1' in _mtls_handshake(mtls_broker, client_context(pki, pki.client_cert, pki.client_key))
    config = kafka_ssl(mtls_broker, pki, **{"ssl.certificate.location": pki.client_cert,
                                            "ssl.key.location": pki.client_key})
    assert produce_and_consume(config, "mtls-topic") == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("who", ["none", "stranger"])
def test_mutual_tls_refuses_a_missing_or_foreign_certificate(mtls_broker, pki, who, caplog):
    context = client_context(pki) if who == "none" else client_context(pki, pki.stranger_cert, pki.stranger_key)
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        _mtls_handshake(mtls_broker, context)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any("TLS handshake failed" in r.getMessage()
                                                  for r in caplog.records):
        time.sleep(0.05)
    assert any("TLS handshake failed" in r.getMessage() for r in caplog.records)
    producer = Producer(kafka_ssl(mtls_broker, pki, **{"message.timeout.ms": 3000}))
    errors: list = []
    producer.produce("refused", b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert len(errors) == 1 and errors[0] is not None  # not delivered: no certificate
    assert b'"opaque":1' in _mtls_handshake(mtls_broker, client_context(pki, pki.client_cert, pki.client_key))


def test_a_plaintext_client_on_an_enforcing_remoting_port_is_refused(mtls_broker, pki):
    host, port = mtls_broker.endpoint("broker (remoting)")
    with socket.create_connection((host, port), timeout=10) as plain:
        with pytest.raises(AssertionError):
            _remoting_heartbeat(plain)
    assert KafkaException  # the import is the client's own error type


def _served_serial(live: LiveBroker, pki: Pki) -> int:
    from cryptography import x509
    port = live.endpoint("kafka (tls)")[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_a_renewed_certificate_is_served_without_dropping_connections(tls_broker, pki):
    from tests.tls.certs import renew_server_certificate
    host, port = tls_broker.endpoint("broker (remoting)")
    old = _served_serial(tls_broker, pki)
    with socket.create_connection((host, port), timeout=10) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as open_before:
        assert b'"opaque":1' in _remoting_heartbeat(open_before)
        new = renew_server_certificate(pki)
        deadline = time.monotonic() + 10
        while _served_serial(tls_broker, pki) != new and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _served_serial(tls_broker, pki) == new != old
        assert b'"opaque":1' in _remoting_heartbeat(open_before)  # still open, still served


def test_kcat_over_ssl(tls_broker, pki):
    broker = "127.0.0.1:%d" % tls_broker.endpoint("kafka (tls)")[1]
    ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}"]
    produced = subprocess.run(["kcat", "-P", "-b", broker, "-t", "kcat-tls", *ssl_args],
                              input=b"k0\nk1\nk2\n", capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-C", "-b", broker, "-t", "kcat-tls", "-o", "beginning", "-e", "-q", *ssl_args],
                              capture_output=True, timeout=60)
    assert sorted(consumed.stdout.split()) == [b"k0", b"k1", b"k2"], consumed.stderr


def test_aio_pika_amqps(tls_broker, pki):
    import asyncio

    import aio_pika

    async def main() -> bytes:
        connection = await aio_pika.connect(host="127.0.0.1", port=tls_broker.endpoint("amqp (tls)")[1], ssl=True,
                                            ssl_context=client_context(pki), timeout=TIMEOUT)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("aio-tls")
            await channel.default_exchange.publish(aio_pika.Message(b"over amqps"), routing_key="aio-tls")
            message = await queue.get(timeout=TIMEOUT)
            await message.ack()
            return message.body

    assert asyncio.run(asyncio.wait_for(main(), TIMEOUT)) == b"over amqps"


def test_kombu_amqps(tls_broker, pki):
    import kombu
    url = "amqp://guest:guest@127.0.0.1:%d//" % tls_broker.endpoint("amqp (tls)")[1]
    with kombu.Connection(url, ssl={"ca_certs": pki.ca, "cert_reqs": ssl.CERT_REQUIRED,
                                    "server_hostname": "localhost"}, connect_timeout=TIMEOUT) as conn:
        queue = conn.SimpleQueue("kombu-tls")
        queue.put(b"over amqps", serializer="raw")
        message = queue.get(timeout=TIMEOUT)
        message.ack()
        assert message.body == b"over amqps"
        queue.close()


def test_java_client_over_ssl(pki, tmp_path):
    """kafka-clients 3.9 over SSL, trusting the test CA as a PEM truststore: idempotent
    produce and a group consume (tests/protocols/kafka/java/KafkaClientCheck.java). One loop
    (uvloop): the JVM's start dominates."""
    from tests.protocols.kafka.java_support import LIB, compile_java
    from tests.support.live_broker import start_live_broker
    from tests.tls.conftest import tls_config
    classes = compile_java(tmp_path / "classes", "KafkaClientCheck")
    props = tmp_path / "ssl.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
    live = start_live_broker(tls_config(str(tmp_path / "store"), pki), "uvloop")
    try:
        live.run(lambda: live.server.broker.create_topic("java-tls", read_queue_nums=2, write_queue_nums=2))
        bootstrap = "127.0.0.1:%d" % live.endpoint("kafka (tls)")[1]
        result = subprocess.run(["java", f"-Dclient.properties={props}", "-cp", f"{classes}:{LIB}/*",
                                 "KafkaClientCheck", bootstrap, "java-tls", "java-tls-group", "200", "lz4"],
                                capture_output=True, text=True, timeout=120)
    finally:
        live.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK 200")
