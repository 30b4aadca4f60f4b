"""The client's pull-body reader and MessageExt, byte level (no broker)."""

from __future__ import annotations

import struct
import zlib

import pytest

from rocketport.client import MessageExt
from rocketport.common.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    encode_properties,
)
from rocketport.core.store.record import encode_record, ip_bytes
from rocketport.protocols.remoting.messages import (
    MESSAGE_MAGIC_CODE,
    MessageFormatError,
    decode_message_ext_records,
    unpack_message_ext_records,
)

PROPS = {"TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": "0A0102030005000000077E9678890001", "RETRY_TOPIC": "Orig"}


def v4_record(body: bytes, sys_flag: int = 0, offset: int = 7) -> bytes:
    return encode_record(topic_bytes=b"%RETRY%G", body=body, props_bytes=encode_properties(PROPS),
                         queue_id=3, flag=0, queue_offset=offset, physical_offset=1000 + offset,
                         sys_flag=sys_flag, born_timestamp=11, born_ip=ip_bytes("10.0.0.1"),
                         born_port=5, store_timestamp=12, store_ip=ip_bytes("10.0.0.2"),
                         store_port=10911, reconsume_times=2, prepared_transaction_offset=0)


def v6_record(body: bytes) -> bytes:
    """The same layout with 16-byte born and store addresses (hand-built)."""
    topic, props = b"T6", encode_properties({"TAGS": "six"})
    host = bytes(15) + b"\x01"
    tail = (struct.pack(">i", len(body)) + body + struct.pack(">B", len(topic)) + topic
            + struct.pack(">h", len(props)) + props)
    middle = (host + struct.pack(">iq", 1, 12) + host + struct.pack(">iiq", 10911, 0, 0))
    head_size = struct.calcsize(">iiiiiqqiq")
    size = head_size + len(middle) + len(tail)
    head = struct.pack(">iiiiiqqiq", size, MESSAGE_MAGIC_CODE, 0, 1, 0, 4, 2000, BORNHOST_V6_FLAG
                       | STOREHOSTADDRESS_V6_FLAG, 11)
    return head + middle + tail


def test_unpack_agrees_with_the_full_decoder():
    data = v4_record(b"hello") + v6_record(b"six body") + v4_record(b"again", offset=8)
    full = decode_message_ext_records(data)
    raws = unpack_message_ext_records(memoryview(data))
    assert [(r[0], r[2], r[3], r[9], r[10]) for r in raws] == [
        (m.queue_id, m.queue_offset, m.commit_log_offset, m.body, m.topic) for m in full]
    msgs = [MessageExt(raw, "broker-a") for raw in raws]
    first, six = msgs[0], msgs[1]
    assert (first.tags, first.keys, first.msg_id, first.reconsume_times) == ("A", ["k1", "k2"], PROPS["UNIQ_KEY"], 2)
    assert first.offset_msg_id == "0A00000200002A9F00000000000003EF"  # 10.0.0.2:10911, offset 1007
    first.reset_retry_topic()
    assert first.topic == "Orig" and first.queue.topic == "Orig"
    assert six.tags == "six" and six.offset_msg_id.startswith("0" * 31 + "1")


def test_compressed_bodies_are_inflated():
    [raw] = unpack_message_ext_records(v4_record(zlib.compress(b"z" * 5000), COMPRESSED_FLAG))
    assert MessageExt(raw, "b").body == b"z" * 5000


@pytest.mark.parametrize("data", [b"\x00" * 10, v4_record(b"x")[:-3],
                                  b"\x00\x00\x00\x80" + b"\x00" * 124])
def test_garbage_is_a_format_error(data):
    with pytest.raises(MessageFormatError):
        unpack_message_ext_records(data)
