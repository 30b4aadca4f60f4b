"""A durable topic subscription keeps what is sent while its subscriber is away across a
SIGKILL of the broker process, as ActiveMQ's does: subscribed (RECEIPT), disconnected, then
messages sent with receipts, the broker killed and restarted: the subscriber gets them all.
The periodic offsets flush is set to an hour, so the subscription's start can only have
been kept by the SUBSCRIBE itself."""

from __future__ import annotations

import re

from tests.support.processes import start_broker, stop, wait_ready

from .stomp_support import RawClient

SETTINGS = ("listenPort=0", "namesrv.port=0", "kafka.enabled=false",
            "flushConsumerOffsetInterval=3600000")
DURABLE = b"SUBSCRIBE\ndestination:/topic/crash\nid:0\nactivemq.subscriptionName:keeper\nack:auto\n"


def _client(log: str) -> RawClient:
    port = int(re.search(r"stomp listening on 127\.0\.0\.1:(\d+)", log).group(1))
    raw = RawClient(("127.0.0.1", port))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\nclient-id:c1\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    return raw


def test_a_durable_subscription_keeps_its_messages_across_a_sigkill(tmp_path):
    root = tmp_path / "store"
    proc = start_broker(root, *SETTINGS)
    try:
        log = wait_ready(proc)
        subscriber = _client(log)
        subscriber.send(DURABLE + b"receipt:s\n\n\0DISCONNECT\nreceipt:d\n\n\0")
        assert subscriber.frame() == b"RECEIPT\nreceipt-id:s\n\n\0"
        assert subscriber.frame() == b"RECEIPT\nreceipt-id:d\n\n\0"
        sender = _client(log)
        for i in range(5):
            sender.send(b"SEND\ndestination:/topic/crash\nreceipt:%d\n\nm%d\0" % (i, i))
            assert sender.frame() == b"RECEIPT\nreceipt-id:%d\n\n\0" % i
    finally:
        proc.kill()  # SIGKILL right after the last receipt
        proc.wait()
    again = start_broker(root, *SETTINGS)
    try:
        subscriber = _client(wait_ready(again))
        subscriber.send(DURABLE + b"\n\0")
        bodies = [subscriber.frame().rsplit(b"\n\n", 1)[1].rstrip(b"\0") for _ in range(5)]
        assert bodies == [b"m%d" % i for i in range(5)]
    finally:
        stop(again)
