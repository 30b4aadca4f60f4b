"""Hypothesis against a live broker: every malformed frame after a good CONNECT gets an
ERROR and a close, arbitrary bytes never hurt the broker, and a subscriber connected the
whole time keeps receiving."""

from __future__ import annotations

import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.live_broker import start_live_broker

from .stomp_support import connect, endpoint

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
CONNECT = b"CONNECT\naccept-version:1.2\nhost:x\n\n\0"


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    from rocketport.core.config import BrokerConfig, ProtocolConfig
    config = BrokerConfig(store_path_root_dir=str(tmp_path_factory.mktemp("stomp-fuzz") / "store"),
                          mapped_file_size_commit_log=4 << 20, mapped_file_size_consume_queue=20 * 1024,
                          max_hash_slot_num=1024, max_index_num=4096, listen_port=0,
                          namesrv=ProtocolConfig(False, 0), kafka=ProtocolConfig(False, 0),
                          amqp=ProtocolConfig(False, 0), stomp=ProtocolConfig(True, 0))
    live = start_live_broker(config)
    bystander, listener = connect(live)
    bystander.subscribe("/topic/alive", id="b", ack="auto", receipt="sub")
    listener.wait_receipt("sub")
    try:
        yield live
        probe, _ = connect(live)
        probe.send("/topic/alive", b"still here")
        probe.disconnect(receipt="p")
        assert [body for _, body in listener.wait_messages(1)] == [b"still here"]
        assert bystander.is_connected()
        bystander.disconnect()
    finally:
        live.stop()


def shoot(address: tuple[str, int], data: bytes, timeout: float = 5.0) -> bytes:
    """Write, half-close, read until the broker closes (bounded)."""
    received = bytearray()
    deadline = time.monotonic() + timeout
    with socket.create_connection(address, timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            received += chunk
    return bytes(received)


_name = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters=":\\"),
                min_size=1, max_size=12)
_value = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters="\\"), max_size=20)
_headers = st.lists(st.tuples(_name, _value), max_size=5).map(
    lambda items: b"".join(f"{k}:{v}\n".encode() for k, v in items))
_body = st.binary(max_size=64).filter(lambda b: b"\0" not in b)

_malformed = st.one_of(
    st.builds(lambda c, h: c.encode() + b"\n" + h + b"\n\0",
              st.text(st.characters(min_codepoint=0x41, max_codepoint=0x5A), min_size=1, max_size=12)
              .filter(lambda c: c not in {"CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK",
                                          "NACK", "BEGIN", "COMMIT", "ABORT", "DISCONNECT"}), _headers),
    st.builds(lambda h, junk: b"SEND\ndestination:/queue/f\n" + h + junk.encode() + b"\n\n\0", _headers,
              _name),  # a header line without ':'
    st.builds(lambda h, c: b"SEND\ndestination:/queue/f\n" + h + b"k:a\\" + c.encode() + b"\n\n\0", _headers,
              st.sampled_from("abdefgtxyz0\" ")),  # an undefined escape
    st.builds(lambda n, body: b"SEND\ndestination:/queue/f\ncontent-length:%d\n\n" % n + body + b"x\0",
              st.integers(0, 8), st.binary(min_size=8, max_size=8)),  # no NUL where content-length ends
    st.builds(lambda h, bad: b"SEND\ndestination:/queue/f\n" + h + b"k:" + bad + b"\n\n\0", _headers,
              st.sampled_from([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xf0\x28\x8c\xbc"])),
    st.builds(lambda dest, body: b"SEND\ndestination:" + dest.encode() + b"\n\n" + body + b"\0",
              st.sampled_from(["", "/other/x", "queue/x", "/queue/", "/queue/a/b", "/topic/a b",
                               "/exchange/e/a.*"]), _body),
    st.builds(lambda h: b"ACK\n" + h + b"id:nope\n\n\0", _headers),
    st.builds(lambda h: b"COMMIT\n" + h + b"transaction:never-begun\n\n\0", _headers),
    st.builds(lambda h: b"SUBSCRIBE\n" + h + b"destination:/queue/f\nid:1\nack:sometimes\n\n\0", _headers),
)


@SETTINGS
@given(_malformed)
def test_every_malformed_frame_gets_error_then_close(fuzz_broker, frame):
    answer = shoot(endpoint(fuzz_broker), CONNECT + frame)
    assert answer.startswith(b"CONNECTED\n"), answer[:200]
    rest = answer[answer.index(b"\0") + 1:]
    assert rest.startswith(b"ERROR\n") and b"\nmessage:" in rest, (frame, rest[:300])
    head, _, body = rest.partition(b"\n\n")
    length = int(head.split(b"\ncontent-length:")[1].split(b"\n")[0])
    assert body[length:] == b"\0", "the ERROR frame is the last thing sent"


@SETTINGS
@given(st.binary(max_size=512), st.booleans())
def test_arbitrary_bytes_never_hurt_the_broker(fuzz_broker, data, connected_first):
    answer = shoot(endpoint(fuzz_broker), (CONNECT if connected_first else b"") + data, timeout=3)
    assert answer == b"" or answer.startswith((b"CONNECTED\n", b"ERROR\n", b"RECEIPT\n", b"MESSAGE\n"))
