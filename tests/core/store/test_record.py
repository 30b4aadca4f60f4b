import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketport.common.message import decode_properties, encode_properties, property_needles, raw_property
from rocketport.core.store import formats
from rocketport.core.store.record import (
    BadRecord,
    decode_record,
    encode_record,
    parse_record_info,
    record_size,
)


def _record(**over):
    args = dict(topic_bytes=b"TopicA", body=b"hello world", props_bytes=encode_properties({"TAGS": "t1", "KEYS": "k1 k2"}),
                queue_id=3, flag=7, queue_offset=42, physical_offset=1000, sys_flag=0,
                born_timestamp=111, born_ip=b"\x0a\x00\x00\x01", born_port=5555,
                store_timestamp=222, store_ip=b"\x7f\x00\x00\x01", store_port=10911,
                reconsume_times=2, prepared_transaction_offset=9)
    args.update(over)
    return encode_record(**args)


def test_construct_decoder_agrees_with_struct_encoder():
    rec = _record()
    parsed = formats.CommitLogRecord.parse(rec)
    assert parsed.total_size == len(rec) == record_size(11, 6, len(parsed.properties))
    assert parsed.body == b"hello world"
    assert parsed.topic == "TopicA"
    assert parsed.queue_id == 3 and parsed.flag == 7 and parsed.queue_offset == 42
    assert parsed.physical_offset == 1000 and parsed.reconsume_times == 2
    assert parsed.prepared_transaction_offset == 9
    assert parsed.born_host.ip == b"\x0a\x00\x00\x01" and parsed.born_host.port == 5555
    assert parsed.body_crc == zlib.crc32(b"hello world") & 0x7FFFFFFF
    assert decode_properties(parsed.properties) == {"TAGS": "t1", "KEYS": "k1 k2"}


def test_decode_record_round_trip():
    msg = decode_record(_record())
    assert msg.topic == "TopicA" and msg.body == b"hello world"
    assert msg.tags == "t1" and msg.keys == ["k1", "k2"]
    assert msg.born_host == ("10.0.0.1", 5555) and msg.store_host == ("127.0.0.1", 10911)


@pytest.mark.parametrize("damage", ["magic", "crc", "size", "truncate"])
def test_parse_record_info_rejects_damage(damage):
    rec = bytearray(_record())
    limit = len(rec)
    if damage == "magic":
        rec[4] ^= 0xFF
    elif damage == "crc":
        rec[90] ^= 0x01  # inside the body
    elif damage == "size":
        rec[3] += 1
    else:
        limit -= 5
    with pytest.raises(BadRecord):
        parse_record_info(memoryview(rec), 0, limit, check_crc=True)


def test_properties_codec_round_trip_and_tolerance():
    props = {"A": "1", "UNIQ_KEY": "ABC", "empty": ""}
    assert decode_properties(encode_properties(props)) == props
    assert decode_properties(b"A\x011\x02B\x012") == {"A": "1", "B": "2"}
    assert decode_properties(b"") == {}


_names = st.text("abTé", min_size=1, max_size=3)  # names that are suffixes of each other


@given(st.lists(st.tuples(_names, st.text("ab1é\x00", max_size=3)), max_size=5), _names,
       st.booleans())
def test_raw_property_agrees_with_decoding(pairs, name, trailing):
    raw = b"".join(f"{k}\x01{v}\x02".encode() for k, v in pairs)  # duplicates too
    if not trailing:
        raw = raw[:-1]
    assert raw_property(raw, property_needles(name)) == decode_properties(raw).get(name)
