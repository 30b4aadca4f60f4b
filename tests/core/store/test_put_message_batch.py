"""The store's one-pass write of a MessageBatch body (`put_message_batch`): each entry a
record of its own, read back as `decode_batch` reads the body; bad bodies refused whole."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.common.batch.message_batch import BatchMessage, decode_batch, encode_batch
from rocketport.common.tags import tags_code
from rocketport.core.config import BrokerConfig
from rocketport.core.errors import InvalidMessage, MessageTooLarge
from rocketport.core.store.consume_queue import CQ_ENTRY

from .helpers import drain, open_store, run


def test_store_writes_each_entry_as_its_own_record(small_config):
    batch = [BatchMessage(b"a", {"TAGS": "A", "UNIQ_KEY": "U1", "KEYS": "k"}, flag=3),
             BatchMessage(b"", {}),
             BatchMessage(b"c" * 300, {"KEYS": "x", "TAGS": "B"})]

    async def main():
        async with open_store(small_config) as store:
            await store.put_message_batch("T", 1, encode_batch(batch[:1]),
                                          sys_flag=0, born_timestamp=5, born_host=("10.0.0.9", 77))
            result = await store.put_message_batch("T", 1, encode_batch(batch), sys_flag=0,
                                                   born_timestamp=1234, born_host=("10.0.0.9", 77),
                                                   reconsume_times=2)
            assert (result.queue_offset, result.count) == (1, 3)
            assert result.commit_log_offset == result.record_offsets[0]
            assert result.wrote_bytes == store.commitlog.max_offset - result.commit_log_offset
            got = store.get_messages("T", 1, 1, 10)
            assert got.message_count == 3
            for i, (message, sent) in enumerate(zip(got.messages(), batch)):
                assert message.commit_log_offset == result.record_offsets[i]
                assert (message.queue_offset, message.queue_id, message.topic) == (1 + i, 1, "T")
                assert bytes(message.body) == sent.body and message.properties == sent.properties
                assert message.flag == sent.flag and message.reconsume_times == 2
                assert message.born_timestamp == 1234 and message.born_host == ("10.0.0.9", 77)
                assert message.body_crc == zlib.crc32(sent.body) & 0x7FFFFFFF
            entries = store.get_consume_queue("T", 1).entries(1, 3)
            assert [code for _, _, code in CQ_ENTRY.iter_unpack(entries)] == [
                tags_code("A"), 0, tags_code("B")]
        async with open_store(small_config) as store:  # the records survive a restart
            assert [body for _, body in drain(store, "T", 1)][1:] == [b"a", b"", b"c" * 300]
    run(main())


def test_store_opens_a_new_segment_for_a_batch_that_does_not_fit(small_config):
    """The offsets a batch's records carry are those of the segment it finally lands in."""
    entry = encode_batch([BatchMessage(b"y" * 1000, {"TAGS": "t"})] * 10)

    async def main():
        async with open_store(small_config) as store:
            for _ in range(8):  # ~88 KB over 64 KiB segments: one batch must move
                await store.put_message_batch("S", 0, entry, sys_flag=0, born_timestamp=1,
                                              born_host=("127.0.0.1", 1))
            assert len(store.commitlog.queue.files) == 2
            got = drain(store, "S", 0)
            assert [o for o, _ in got] == list(range(80)) and {b for _, b in got} == {b"y" * 1000}
            for offset in (0, 55, 79):  # each record names the offset it lies at
                phys, _, _ = store.get_consume_queue("S", 0).entry(offset)
                assert store.message_at(phys).queue_offset == offset
    run(main())


@pytest.mark.parametrize("raw", [
    struct.pack(">iiiii", 100, 0, 0, 0, 0) + b"\x00\x00",  # runs past the end
    struct.pack(">iiiii", 23, 0, 0, 0, 0) + b"\x00\x00" + b"x",  # properties do not fill it
    encode_batch([BatchMessage(b"ok", {})]) + b"\x00\x00\x00",  # truncated second head
])
def test_store_refuses_a_bad_batch_and_writes_nothing(small_config, raw):
    async def main():
        async with open_store(small_config) as store:
            with pytest.raises(InvalidMessage):
                await store.put_message_batch("T", 0, raw, sys_flag=0, born_timestamp=1,
                                              born_host=("127.0.0.1", 1))
            with pytest.raises(InvalidMessage):
                await store.put_message_batch("T", 0, b"", sys_flag=0, born_timestamp=1,
                                              born_host=("127.0.0.1", 1))
            assert store.commitlog.max_offset == 0 and store.max_offset("T", 0) == 0
    run(main())


def test_store_refuses_a_batch_over_the_size_limit(small_config):
    cfg = small_config.with_overrides(max_message_size=4096)
    fits = encode_batch([BatchMessage(b"z" * 100, {})] * 10)  # 1,220 B sent, 2,100 B stored
    too_many = encode_batch([BatchMessage(b"z" * 100, {})] * 30)  # 3,660 B sent, 6,300 stored

    async def main():
        async with open_store(cfg) as store:
            with pytest.raises(MessageTooLarge):
                await store.put_message_batch("T", 0, too_many, sys_flag=0, born_timestamp=1,
                                              born_host=("127.0.0.1", 1))
            assert store.commitlog.max_offset == 0
            result = await store.put_message_batch("T", 0, fits, sys_flag=0, born_timestamp=1,
                                                   born_host=("127.0.0.1", 1))
            assert result.count == 10
    run(main())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=60), st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a"]), st.text("xyz é", max_size=6), max_size=3),
    st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=8))
def test_store_batch_reads_back_as_decode_batch_reads_it(tmp_path_factory, items):
    config = BrokerConfig(store_path_root_dir=str(tmp_path_factory.mktemp("store")),
                          mapped_file_size_commit_log=64 * 1024)
    raw = encode_batch([BatchMessage(body, props, flag) for body, props, flag in items])

    async def main():
        async with open_store(config) as store:
            await store.put_message_batch("H", 0, raw, sys_flag=0, born_timestamp=1,
                                          born_host=("127.0.0.1", 1))
            got = list(store.get_messages("H", 0, 0, 100).messages())
            expected = decode_batch(raw)
            assert [(bytes(m.body), m.properties, m.flag) for m in got] == [
                (bytes(e.body), e.properties, e.flag) for e in expected]
    run(main())


def test_store_lets_the_caller_decline_a_batch_by_its_properties(small_config):
    raw = encode_batch([BatchMessage(b"1", {"TAGS": "a"}), BatchMessage(b"2", {"DELAY": "3"})])
    seen = []

    def declines(properties: list[bytes]) -> bool:
        seen.append(properties)
        return any(b"DELAY\x01" in p for p in properties)

    async def main():
        async with open_store(small_config) as store:
            result = await store.put_message_batch("T", 0, raw, sys_flag=0, born_timestamp=1,
                                                   born_host=("127.0.0.1", 1), declines=declines)
            assert result is None and seen == [[b"TAGS\x01a\x02", b"DELAY\x013\x02"]]
            assert store.commitlog.max_offset == 0 and store.max_offset("T", 0) == 0
    run(main())


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=120), st.data())
def test_store_takes_any_bytes_as_a_batch_without_harm(tmp_path_factory, raw, data):
    """Arbitrary bytes, alone or after a good entry: either refused as InvalidMessage with
    nothing written, or stored exactly as `decode_batch` reads them."""
    config = BrokerConfig(store_path_root_dir=str(tmp_path_factory.mktemp("store")))
    if data.draw(st.booleans()):
        raw = encode_batch([BatchMessage(b"ok", {"TAGS": "t"})]) + raw

    async def main():
        async with open_store(config) as store:
            try:
                expected = decode_batch(raw)
            except InvalidMessage:
                expected = None
            try:
                result = await store.put_message_batch("F", 0, raw, sys_flag=0, born_timestamp=1,
                                                       born_host=("127.0.0.1", 1))
            except InvalidMessage:
                assert expected is None or not raw
                assert store.commitlog.max_offset == 0 and store.max_offset("F", 0) == 0
                return
            assert expected is not None and result.count == len(expected)
            got = list(store.get_messages("F", 0, 0, 100).messages())
            assert [(bytes(m.body), m.properties, m.flag) for m in got] == [
                (bytes(e.body), e.properties, e.flag) for e in expected]
    run(main())
