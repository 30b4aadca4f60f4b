"""Pull-body MessageExt records and message ids."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest

from rocketport.common.message import BORNHOST_V6_FLAG
from rocketport.protocols.remoting.messages import (
    MessageClientIdGenerator,
    MessageFormatError,
    decode_message_ext_records,
    decode_offset_msg_id,
    decode_unique_id,
    encode_offset_msg_id,
)


def message_ext_record(
    *, topic: str, body: bytes, properties: bytes, queue_id: int = 1, queue_offset: int = 2,
    physical_offset: int = 3, sys_flag: int = 0, born: bytes = b"\x0a\x00\x00\x01", store: bytes = b"\x7f\x00\x00\x01",
) -> bytes:
    """A CommitLog/MessageExt record laid out by hand from the documented field list."""
    rest = (
        struct.pack(">iiiqqiq", zlib.crc32(body), queue_id, 7, queue_offset, physical_offset, sys_flag, 1000)
        + born + struct.pack(">i", 5555)
        + struct.pack(">q", 2000) + store + struct.pack(">i", 10911)
        + struct.pack(">iq", 1, 0)
        + struct.pack(">i", len(body)) + body
        + struct.pack(">B", len(topic)) + topic.encode()
        + struct.pack(">h", len(properties)) + properties
    )
    return struct.pack(">iI", 8 + len(rest), 0xDAA320A7) + rest


def test_pull_body_records_decode() -> None:
    first = message_ext_record(topic="T", body=b"one", properties=b"TAGS\x01A\x02UNIQ_KEY\x01U1\x02")
    v6 = socket.inet_pton(socket.AF_INET6, "fe80::1")
    second = message_ext_record(
        topic="%RETRY%g", body=b"", properties=b"", sys_flag=BORNHOST_V6_FLAG, born=v6, queue_offset=9
    )
    messages = decode_message_ext_records(first + second)
    assert [m.topic for m in messages] == ["T", "%RETRY%g"]
    one, two = messages
    assert (one.body, one.tags, one.uniq_key, one.queue_id, one.queue_offset) == (b"one", "A", "U1", 1, 2)
    assert (one.born_host, one.store_host, one.store_size) == (("10.0.0.1", 5555), ("127.0.0.1", 10911), len(first))
    assert (one.body_crc, one.flag, one.born_timestamp, one.store_timestamp, one.reconsume_times) == (
        zlib.crc32(b"one"), 7, 1000, 2000, 1
    )
    assert two.born_host == ("fe80::1", 5555) and two.queue_offset == 9


@pytest.mark.parametrize("cut", [4, 20, 60, -1])
def test_truncated_pull_body_raises(cut: int) -> None:
    record = message_ext_record(topic="T", body=b"abc", properties=b"")
    with pytest.raises(MessageFormatError):
        decode_message_ext_records(record[:cut])


def test_bad_magic_raises() -> None:
    record = bytearray(message_ext_record(topic="T", body=b"abc", properties=b""))
    record[4] = 0
    with pytest.raises(MessageFormatError):
        decode_message_ext_records(bytes(record))


def test_offset_msg_id_layout() -> None:
    msg_id = encode_offset_msg_id("10.1.2.3", 10911, 0x1122334455)
    assert msg_id == "0A010203" "00002A9F" "0000001122334455"
    assert decode_offset_msg_id(msg_id) == ("10.1.2.3", 10911, 0x1122334455)
    assert decode_offset_msg_id(msg_id.lower()) == ("10.1.2.3", 10911, 0x1122334455)
    v6 = encode_offset_msg_id("2001:db8::7", 1, 2)
    assert len(v6) == 56 and decode_offset_msg_id(v6) == ("2001:db8::7", 1, 2)


@pytest.mark.parametrize("bad", ["", "XYZ", "G" * 32, "0" * 31])
def test_bad_offset_msg_ids(bad: str) -> None:
    with pytest.raises(MessageFormatError):
        decode_offset_msg_id(bad)


def test_unique_ids_follow_client_id_setter_layout() -> None:
    clock = iter([1_700_000_000.0, 1_700_000_000.0, 1_700_000_000.5]).__next__  # init, 1st, 2nd
    generator = MessageClientIdGenerator("192.168.0.9", pid=0x1234, seed=0xCAFEBABE, clock=clock)
    first, second = generator.next_id(), generator.next_id()
    assert len(first) == 32 and first.isupper() and first != second
    assert first.startswith("C0A80009" "1234" "CAFEBABE")
    a, b = decode_unique_id(first), decode_unique_id(second)
    assert (a.ip, a.pid, a.seed, a.counter, b.counter) == ("192.168.0.9", 0x1234, 0xCAFEBABE, 0, 1)
    assert b.millis_in_month - a.millis_in_month == 500
    assert 0 <= a.millis_in_month < 31 * 24 * 3600 * 1000
