"""An OSError the store did not type (EIO here, as a failing disk answers; EMFILE, ENOSPC
elsewhere) met on a put reaches every front-end's client as that protocol's error, with one
log line, and the connection it came over keeps working once the store takes writes again.

The failure is injected where a put first touches a queue's files (ConsumeQueue.ensure_room,
before anything is written); the broker runs in this process, real clients connect to it.
Kafka's KAFKA_STORAGE_ERROR is tested with a real descriptor limit in test_many_queues.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import socket

import pika
import pytest

from rocketport.core.config import ProtocolConfig
from rocketport.core.store.consume_queue import ConsumeQueue
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from tests.support.live_broker import LiveBroker, start_live_broker


class Failing:
    """While ``on``, every put's first file access fails with EIO."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on = False
        real = ConsumeQueue.ensure_room

        def ensure_room(cq: ConsumeQueue, queue_offset: int, count: int) -> None:
            if self.on:
                raise OSError(errno.EIO, "Input/output error")
            real(cq, queue_offset, count)

        monkeypatch.setattr(ConsumeQueue, "ensure_room", ensure_room)


@pytest.fixture
def failing(monkeypatch) -> Failing:
    return Failing(monkeypatch)


@pytest.fixture
def broker(small_config) -> LiveBroker:
    config = dataclasses.replace(small_config, listen_port=0, amqp=ProtocolConfig(True, 0),
                                 stomp=ProtocolConfig(True, 0))
    live = start_live_broker(config)
    try:
        live.call(live.server.broker.create_topic_ready("ResR", read_queue_nums=1, write_queue_nums=1))
        yield live
    finally:
        live.stop()


def _one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    failures = [r for r in caplog.records if "Input/output error" in r.getMessage()]
    assert failures, "the failure was not logged"
    assert all(r.exc_info is None for r in failures), "logged with a traceback"


# what a RocketMQ producer retries on (DefaultMQProducer's retryResponseCodes)
RETRIED = {ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR}


def test_remoting_send_gets_a_retried_error_and_the_connection_stays(broker, failing, caplog):
    caplog.set_level(logging.INFO)

    async def send(body: bytes, properties: str = ""):
        header = SendMessageRequestHeader("pg", "ResR", "TBW102", 1, 0, 0, 0, 0, properties)
        return await client.invoke(request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body))

    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        client = runner.run(RemotingClient.connect(broker.addr))
        try:
            failing.on = True
            refused = runner.run(asyncio.wait_for(send(b"refused"), 30))
            assert refused.code in RETRIED and "Input/output error" in refused.remark, refused
            # pipelined sends (one append for the lot) are refused the same way
            async def pipelined():
                return await asyncio.gather(*(send(b"%d" % i) for i in range(8)))

            lane = runner.run(asyncio.wait_for(pipelined(), 30))
            assert {r.code for r in lane} <= RETRIED, lane
            # a delayed send takes the handlers' path, not the plain-send lane
            delayed = runner.run(asyncio.wait_for(send(b"later", "DELAY\x012\x02"), 30))
            assert delayed.code in RETRIED and "Input/output error" in delayed.remark, delayed
            failing.on = False
            assert runner.run(asyncio.wait_for(send(b"stored"), 30)).code == ResponseCode.SUCCESS
            assert not client.closed
        finally:
            runner.run(client.close())
    _one_line_each(caplog)


def test_amqp_publish_is_nacked_or_a_resource_error_and_the_connection_stays(broker, failing, caplog):
    caplog.set_level(logging.INFO)
    host, port = broker.endpoint("amqp")
    conn = pika.BlockingConnection(pika.ConnectionParameters(host, port, blocked_connection_timeout=30))
    try:
        channel = conn.channel()
        channel.queue_declare("resq", durable=True)
        channel.confirm_delivery()
        failing.on = True
        with pytest.raises(pika.exceptions.NackError):  # confirm mode: a nack
            channel.basic_publish("", "resq", b"refused", mandatory=False)
        plain = conn.channel()  # no confirms: the channel is closed with 506 RESOURCE_ERROR
        plain.basic_publish("", "resq", b"refused")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
            for _ in range(50):
                plain.queue_declare("resq", passive=True)
                conn.sleep(0.05)
        assert closed.value.reply_code == 506
        failing.on = False
        channel.basic_publish("", "resq", b"stored")  # the confirm channel and connection stay
        assert conn.is_open
        assert conn.channel().queue_declare("resq", passive=True).method.message_count == 1
    finally:
        conn.close()
    _one_line_each(caplog)


def _stomp_frame(command: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    head = "".join(f"{k}:{v}\n" for k, v in headers.items())
    return f"{command}\n{head}\n".encode() + body + b"\0"


def _read_frame(sock: socket.socket, buf: bytearray) -> bytes:
    while b"\0" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    frame, _, rest = bytes(buf).partition(b"\0")
    buf[:] = rest.lstrip(b"\n")
    return frame


def test_stomp_send_gets_a_resource_error_frame(broker, failing, caplog):
    """STOMP has one error answer, ERROR, after which the server must close the connection
    (STOMP 1.2): the client hears RESOURCE_ERROR (try again), not an internal error, and a
    new connection stores."""
    caplog.set_level(logging.INFO)
    host, port = broker.endpoint("stomp")

    def connect() -> tuple[socket.socket, bytearray]:
        sock = socket.create_connection((host, port), timeout=30)
        buf = bytearray()
        sock.sendall(_stomp_frame("CONNECT", {"accept-version": "1.2", "host": "/"}))
        assert _read_frame(sock, buf).startswith(b"CONNECTED")
        return sock, buf

    failing.on = True
    for extra in ({}, {"x-delay": "1000"}):  # the plain-send lane, and the general put
        sock, buf = connect()
        try:
            sock.sendall(_stomp_frame("SEND", {"destination": "/queue/resq", "receipt": "r1", **extra},
                                      b"refused"))
            frame = _read_frame(sock, buf)
            assert frame.startswith(b"ERROR") and b"message:RESOURCE_ERROR" in frame, frame
        finally:
            sock.close()
    failing.on = False
    sock, buf = connect()
    try:
        sock.sendall(_stomp_frame("SEND", {"destination": "/queue/resq", "receipt": "r2"}, b"stored"))
        assert _read_frame(sock, buf).startswith(b"RECEIPT")
    finally:
        sock.close()
    _one_line_each(caplog)
