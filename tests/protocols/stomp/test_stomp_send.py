"""CONNECT, SEND, RECEIPT, DISCONNECT and ERROR with stomp.py and raw bytes against a live
broker: what is sent is stored with its headers as properties."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tests.support.live_broker import start_live_broker

from .stomp_support import RawClient, connect, endpoint, stored


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_send_with_receipt_stores_body_headers_and_tag(stomp_broker, version):
    conn, listener = connect(stomp_broker, version)
    conn.send("/queue/orders", b"\0binary\0body", headers={"color": "red", "x-tags": "TagA",
                                                           "x-keys": "k1 k2", "content-type": "app/x"},
              receipt="r-1")
    listener.wait_receipt("r-1")
    conn.disconnect()
    [msg] = stored(stomp_broker, "orders")
    assert msg.body == b"\0binary\0body"
    assert msg.tags == "TagA" and msg.keys == ["k1", "k2"]
    assert msg.properties["color"] == "red" and msg.properties["content-type"] == "app/x"
    assert "destination" not in msg.properties and "receipt" not in msg.properties


def test_header_escapes_survive_into_properties(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED\nversion:1.2\n")
    raw.send(b"SEND\ndestination:/queue/esc\nk\\cey:a\\nb\\\\c\nreceipt:1\n\nx\0")
    assert raw.frame() == b"RECEIPT\nreceipt-id:1\n\n\0"
    raw.send(b"DISCONNECT\nreceipt:bye\n\n\0")
    assert raw.frame() == b"RECEIPT\nreceipt-id:bye\n\n\0"
    assert raw.closed()
    [msg] = stored(stomp_broker, "esc")
    assert msg.properties["k:ey"] == "a\nb\\c"


def test_disconnect_receipt_comes_after_every_earlier_send_is_stored(stomp_broker):
    conn, listener = connect(stomp_broker)
    for i in range(500):
        conn.send("/queue/many", b"m%d" % i)
    conn.disconnect(receipt="done")
    assert sorted(m.body for m in stored(stomp_broker, "many")) == sorted(b"m%d" % i for i in range(500))


def test_connect_negotiates_the_best_common_version(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"STOMP\naccept-version:1.0,1.1\nhost:x\nheart-beat:0,0\n\n\0")
    frame = raw.frame()
    assert frame.startswith(b"CONNECTED\n") and b"version:1.1\n" in frame


def test_unsupported_version_gets_error_with_the_supported_ones(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:2.0\nhost:x\n\n\0")
    frame = raw.frame()
    assert frame.startswith(b"ERROR\n") and b"version:1.0,1.1,1.2\n" in frame
    assert raw.closed()


@pytest.mark.parametrize("frame,message", [
    (b"SEND\ndestination:/queue/a\n\n\0", b"expected CONNECT"),
])
def test_a_frame_before_connect_is_refused(stomp_broker, frame, message):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(frame)
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and message in error
    assert raw.closed()


@pytest.mark.parametrize("frame,message", [
    (b"SEND\ndestination:/nowhere/a\nreceipt:77\n\n\0", b"unsupported destination"),
    (b"SEND\nreceipt:77\n\n\0", b"no destination"),
    (b"SEND\ndestination:/queue/a b\nreceipt:77\n\n\0", b"only letters"),
    (b"SEND\ndestination:/queue/a\ntransaction:nope\nreceipt:77\n\n\0", b"not begun"),
    (b"ACK\nid:9-9\nreceipt:77\n\n\0", b"unknown message"),
    (b"CONNECT\naccept-version:1.2\nreceipt:77\n\n\0", b"on a connected session"),
])
def test_errors_carry_message_and_receipt_id_then_close(stomp_broker, frame, message):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    raw.send(frame)
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"receipt-id:77\n" in error and b"message:" in error
    assert message in error
    assert raw.closed()


def test_malformed_frame_gets_error_and_the_broker_serves_others(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\n\n\0BOGUS\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"unknown command" in error
    assert raw.closed()
    conn, listener = connect(stomp_broker)
    conn.send("/queue/after", b"ok", receipt="r")
    listener.wait_receipt("r")
    conn.disconnect()
    assert [m.body for m in stored(stomp_broker, "after")] == [b"ok"]


@pytest.fixture(params=["ASYNC_FLUSH", "SYNC_FLUSH"])
def flush_broker(request, stomp_config):
    live = start_live_broker(dataclasses.replace(stomp_config, flush_disk_type=request.param))
    try:
        yield live
    finally:
        live.stop()


def test_thousands_of_pipelined_sends_in_one_write_are_all_answered(flush_broker):
    """More frames in one read than the in-flight bound: the rest must start as the first
    ones are answered (they once waited for a read that never came). Under SYNC_FLUSH runs
    of SENDs to one topic share an append and a fsync; with two topics interleaved they
    still come out in order, each with its own properties."""
    stomp_broker = flush_broker
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    frames = [b"SEND\ndestination:/queue/piped\n%s\nm%d\0" % (b"receipt:%d\n" % i if i % 1000 == 999 else b"", i)
              for i in range(5000)]
    raw.send(b"".join(frames))
    assert [raw.frame() for _ in range(5)] == [b"RECEIPT\nreceipt-id:%d\n\n\0" % i
                                               for i in range(999, 5000, 1000)]
    piped = stored(stomp_broker, "piped")
    assert sorted(m.body for m in piped) == sorted(b"m%d" % i for i in range(5000))
    raw.send(b"".join(b"SEND\ndestination:/queue/%s\nn:%d\n%s\n\0" % (b"odd" if i % 3 else b"even", i,
                                                                       b"receipt:last\n" if i == 99 else b"")
                      for i in range(100)))
    assert raw.frame() == b"RECEIPT\nreceipt-id:last\n\n\0"
    odd = [int(m.properties["n"]) for m in stored(stomp_broker, "odd")]
    assert sorted(odd) == [i for i in range(100) if i % 3]


def test_pipelined_sends_come_back_as_the_same_message_frames(flush_broker):
    """Runs of SENDs with one repeated header block (stored with one call, the block parsed
    once) are delivered frame for frame as single SENDs are: the headers sent, x-tags for
    the tag, nothing of how the store keeps them (no UNIQ_KEY, no record tag header)."""
    raw = RawClient(endpoint(flush_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    frames = [b"SEND\ndestination:/queue/same\nx-tags:T\ncolor:a\\cb\n%s\nm%d\0"
              % (b"receipt:%d\n" % i if i % 50 == 49 else b"", i) for i in range(200)]
    raw.send(b"".join(frames))
    assert [raw.frame() for _ in range(4)] == [b"RECEIPT\nreceipt-id:%d\n\n\0" % i for i in range(49, 200, 50)]
    raw.send(b"SUBSCRIBE\ndestination:/queue/same\nid:s\nack:client-individual\nprefetch-count:500\n\n\0")
    received = [raw.frame() for _ in range(200)]
    for i, frame in enumerate(sorted(received, key=lambda f: int(f[f.index(b"\n\nm") + 3:-1]))):
        head, body = frame[:-1].split(b"\n\n", 1)
        lines = head.split(b"\n")
        assert lines[:3] == [b"MESSAGE", b"subscription:s", b"destination:/queue/same"]
        names = [line.split(b":", 1)[0] for line in lines[3:]]
        assert names == [b"message-id", b"ack", b"redelivered", b"color", b"x-tags", b"content-length"]
        assert b"color:a\\cb" in lines and b"x-tags:T" in lines
        assert body == b"m%d" % i
    raw.close()


def test_under_sync_flush_receipts_come_after_the_fsync_and_plain_sends_wait_for_none(stomp_config):
    """A SEND's receipt and a DISCONNECT's receipt mean that what was sent is on disk; a
    SEND without one starts no fsync of its own (the run's receipt, or the periodic flush,
    covers it), as RocketMQ's sends without WAIT."""
    live = start_live_broker(dataclasses.replace(stomp_config, flush_disk_type="SYNC_FLUSH",
                                                 flush_interval_commit_log=60_000))
    store = live.server.broker.store

    def durable_and_end() -> tuple[int, int, int]:
        return store.flush_service.flushed_offset, store.commitlog.max_offset, store.flush_service.sync_count
    try:
        raw = RawClient(endpoint(live))
        raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
        assert raw.frame().startswith(b"CONNECTED")
        raw.send(b"SEND\ndestination:/queue/synced\nreceipt:first\n\nwarm\0")
        assert raw.frame() == b"RECEIPT\nreceipt-id:first\n\n\0"
        flushed, end, syncs = live.call(durable_and_end)
        assert flushed >= end
        raw.send(b"".join(b"SEND\ndestination:/queue/synced\n\nplain%d\0" % i for i in range(50)))
        deadline = time.monotonic() + 10
        while len(stored(live, "synced")) < 51 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # a sync started for them would have ended by now
        flushed_now, end_now, syncs_now = live.call(durable_and_end)
        assert end_now > end and flushed_now < end_now and syncs_now == syncs  # no fsync asked for
        raw.send(b"SEND\ndestination:/queue/synced\nreceipt:r\n\nlast\0")
        assert raw.frame() == b"RECEIPT\nreceipt-id:r\n\n\0"
        flushed, end, _ = live.call(durable_and_end)
        assert flushed >= end
        raw.send(b"SEND\ndestination:/queue/synced\n\nbye\0DISCONNECT\nreceipt:d\n\n\0")
        assert raw.frame() == b"RECEIPT\nreceipt-id:d\n\n\0"
        flushed, end, _ = live.call(durable_and_end)
        assert flushed >= end
    finally:
        live.stop()


def test_a_core_refusal_is_said_through_the_error_map(stomp_config):
    """The core's typed error reaches the client as the map says it (its kind, then why):
    a SEND to a topic that does not exist, with topic auto-creation off."""
    live = start_live_broker(dataclasses.replace(stomp_config, auto_create_topic_enable=False))
    try:
        raw = RawClient(endpoint(live))
        raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
        assert raw.frame().startswith(b"CONNECTED")
        raw.send(b"SEND\ndestination:/queue/nowhere\nreceipt:5\n\nx\0")
        error = raw.frame()
        assert error.startswith(b"ERROR\n") and b"receipt-id:5\n" in error
        assert b"\nmessage:NOT_FOUND - " in error and b"nowhere" in error
        assert raw.closed()
    finally:
        live.stop()


def test_a_body_over_the_limit_gets_an_error_the_client_can_read(stomp_broker):
    """The refused frame's rest is still coming when the ERROR goes: the broker reads and
    drops it (half-closed) instead of resetting the connection under the client's send."""
    limit = stomp_broker.server.broker.config.max_message_size
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    size = 4 * limit
    raw.send(b"SEND\ndestination:/queue/huge\nreceipt:r\ncontent-length:%d\n\n" % size)
    raw.send(bytes(size) + b"\0")  # a reset would raise here (ECONNRESET / EPIPE)
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"is larger than configured max size %d" % limit in error and b"receipt-id:r" not in error
    assert raw.closed()
