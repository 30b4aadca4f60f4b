"""What a receipt promises, and what a slow consumer costs: a SIGKILLed SYNC_FLUSH broker
process keeps every SEND it receipted, and a subscriber that stops reading makes the
broker buffer only a bounded amount before its deliveries pause."""

from __future__ import annotations

import re
import socket
import time

from tests.support.processes import start_broker, stop, wait_ready

from .stomp_support import RawClient, connect, endpoint


def _stomp_port(log: str) -> int:
    return int(re.search(r"stomp listening on 127\.0\.0\.1:(\d+)", log).group(1))


def test_receipted_sends_survive_a_sigkill_under_sync_flush(tmp_path):
    root = tmp_path / "store"
    settings = ("listenPort=0", "namesrv.port=0", "kafka.port=0", "flushDiskType=SYNC_FLUSH")
    proc = start_broker(root, *settings)
    try:
        port = _stomp_port(wait_ready(proc))
        raw = RawClient(("127.0.0.1", port))
        raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
        assert raw.frame().startswith(b"CONNECTED")
        for batch in range(5):
            raw.send(b"".join(b"SEND\ndestination:/queue/durable\n%s\nb%d-%d\0"
                              % (b"receipt:%d\n" % batch if i == 99 else b"", batch, i) for i in range(100)))
            assert raw.frame() == b"RECEIPT\nreceipt-id:%d\n\n\0" % batch
    finally:
        proc.kill()  # SIGKILL right after the last receipt
        proc.wait()
    again = start_broker(root, *settings)
    try:
        port = _stomp_port(wait_ready(again))
        raw = RawClient(("127.0.0.1", port))
        raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0SUBSCRIBE\ndestination:/queue/durable\nid:0\n\n\0")
        assert raw.frame().startswith(b"CONNECTED")
        bodies = set()
        for _ in range(500):
            frame = raw.frame()
            bodies.add(frame.rsplit(b"\n\n", 1)[1].rstrip(b"\0"))
        assert bodies == {b"b%d-%d" % (batch, i) for batch in range(5) for i in range(100)}
    finally:
        stop(again)


def test_a_subscriber_that_stops_reading_is_paused_not_buffered_for(stomp_broker):
    producer, listener = connect(stomp_broker)
    body = b"x" * 1024
    for i in range(20_000):
        producer.send("/queue/slow", body)
    producer.disconnect(receipt="sent")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(endpoint(stomp_broker))
    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0SUBSCRIBE\ndestination:/queue/slow\nid:0\nack:auto\n\n\0")

    def buffered() -> tuple[int, int]:
        sessions = stomp_broker.server.front_ends["stomp"].sessions
        if not sessions:
            return 0, 1
        [session] = sessions
        return session.transport.get_write_buffer_size(), session.transport.get_write_buffer_limits()[1]
    # the broker writes until the socket is full and its buffer passes the high-water mark,
    # which pauses the subscriber: from then on the buffer can only stay as it is
    deadline = time.monotonic() + 60
    while (size := stomp_broker.call(buffered))[0] <= size[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert size[0] > size[1], "the subscriber filled the socket and the write buffer"
    assert stomp_broker.call(buffered)[0] < 2 << 20, "at most a dispatch slice over the high-water mark"
    received = 0
    sock.settimeout(20)
    deadline = time.monotonic() + 60
    while received < 20_001 and time.monotonic() < deadline:
        received += sock.recv(1 << 20).count(b"\0")
    sock.close()
    assert received == 20_000 + 1  # and the CONNECTED frame
