"""Stored inner batches read through the one expander: a 1,000-record lz4 batch pulled 32 at
a time is decompressed once and served byte-exact; a filter that cuts a batch into 1,000
segments still decodes it once; the index builder shares the decompression."""

from __future__ import annotations

import os

from rocketport.common.batch import Record, build_batch, iter_records
from rocketport.common.batch.compression import LZ4
from rocketport.common.batch.messages import record_properties
from rocketport.common.message import PROPERTY_TAGS
from rocketport.common.tags import tags_code
from rocketport.core.config import BrokerConfig
from rocketport.core.filter import compile_filter
from rocketport.core.store.inner_batch import BATCHES, matching_records
from rocketport.core.store.record import HEADER_SIZE, I32, POS_BODY_LENGTH
from rocketport.protocols.remoting.messages import decode_message_ext_records
from rocketport.protocols.remoting.records import pull_body
from tests.core.store.helpers import open_store
from tests.support.aio import run


def _config(tmp_path, index: bool = False) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=str(tmp_path / "store"),
                        mapped_file_size_commit_log=4 << 20, message_index_enable=index)


def _records(n: int, tags: tuple[str, ...]) -> list[Record]:
    # binary header values, but no \x01 or \x02: those bytes are the separators of the
    # properties a remoting record carries them in
    return [Record(i, i % 50, b"key-%d" % i, os.urandom(100),
                   [("tag", tags[i % len(tags)].encode()), ("bin", bytes([0x80 | i % 128, 0xFF, 0])),
                    ("n", str(i).encode())])
            for i in range(n)]


def _stats() -> tuple[int, int]:
    return BATCHES.stats.decompressions, BATCHES.stats.record_decodes


def _since(before: tuple[int, int]) -> tuple[int, int]:
    now = _stats()
    return now[0] - before[0], now[1] - before[1]


def test_pull_32_at_a_time_decompresses_once_and_serves_the_stored_records(tmp_path):
    async def main():
        async with open_store(_config(tmp_path)) as store:
            recs = _records(1000, ("A", "B", "C"))
            batch = build_batch(recs, base_timestamp=1_000_000, compression=LZ4)
            first = (await store.put_inner_batch("T", 0, batch, 1000, tags_codes=[
                tags_code("ABC"[i % 3]) for i in range(1000)])).queue_offset
            res = store.get_messages("T", 0, first, 1)
            view = res.segments[0].view
            body = view[HEADER_SIZE:HEADER_SIZE + I32.unpack_from(view, POS_BODY_LENGTH)[0]]
            stored = list(iter_records(body))  # what the CommitLog holds, decoded apart
            assert stored == recs

            before = _stats()
            got, pulls, offset = [], 0, first
            while offset < first + 1000:
                res = store.get_messages("T", 0, offset, 32)
                got += decode_message_ext_records(b"".join(pull_body(res)))
                offset = res.next_begin_offset
                pulls += 1
            assert pulls == 32
            assert _since(before) == (1, 1)  # one decompression, one decode, 32 pulls

            assert [m.queue_offset for m in got] == list(range(first, first + 1000))
            for m, rec in zip(got, stored):
                assert m.body == rec.value
                assert m.properties["KEYS"].encode("utf-8", "surrogateescape") == rec.key
                for name, value in rec.headers:
                    assert m.properties[name].encode("utf-8", "surrogateescape") == value
                assert m.tags == rec.headers[0][1].decode()
                assert m.born_timestamp == 1_000_000 + rec.timestamp_delta
                assert m.commit_log_offset == view_phys(view)

            # decoded messages (GetResult.messages) are the same records, still no decode
            res = store.get_messages("T", 0, first + 100, 32)
            msgs = list(res.messages())
            assert [(m.queue_offset, m.body, m.keys) for m in msgs] == [
                (first + 100 + i, r.value, [r.key.decode()]) for i, r in enumerate(stored[100:132])]
            assert _since(before) == (1, 1)

            # filters: the same answers as the mapping gives each stored record
            for flt in (compile_filter("TAG", "A || C"),
                        compile_filter("SQL92", "n >= 500 AND TAGS = 'B'")):
                expected = []
                for i, rec in enumerate(stored):
                    props = record_properties(rec.key, rec.headers)
                    if flt.match(props.get(PROPERTY_TAGS), props):
                        expected.append((first + i, rec))
                found, offset = [], first
                while offset < first + 1000:
                    res = store.get_messages("T", 0, offset, 32, message_filter=flt)
                    found += [pair for seg in res.segments for pair in matching_records(seg, flt)]
                    wire = decode_message_ext_records(b"".join(pull_body(res, flt)))
                    assert [m.queue_offset for m in wire] == [
                        o for seg in res.segments for o, _ in matching_records(seg, flt)]
                    offset = res.next_begin_offset
                assert found == expected
            assert _since(before) == (1, 1)
    run(main())


def view_phys(view) -> int:
    from rocketport.core.store.record import I64, POS_PHYSICAL_OFFSET
    return I64.unpack_from(view, POS_PHYSICAL_OFFSET)[0]


def test_tag_pull_over_alternating_records_decodes_the_batch_once(tmp_path):
    async def main():
        async with open_store(_config(tmp_path)) as store:
            recs = _records(2000, ("A", "B"))
            batch = build_batch(recs, base_timestamp=1, compression=LZ4)
            await store.put_inner_batch("Alt", 0, batch, 2000,
                                        tags_codes=[tags_code("AB"[i % 2]) for i in range(2000)])
            flt = compile_filter("TAG", "A")
            before = _stats()
            res = store.get_messages("Alt", 0, 0, 1024, message_filter=flt)
            # the tags-code prefilter leaves every other offset: each match its own segment
            assert len(res.segments) == 1000 and res.message_count == 1000
            got = decode_message_ext_records(b"".join(pull_body(res, flt)))
            assert [m.queue_offset for m in got] == list(range(0, 2000, 2))
            assert [m.body for m in got] == [r.value for r in recs[::2]]
            assert {m.tags for m in got} == {"A"}
            assert _since(before) == (1, 1)  # one decompression for 1,000 segments
    run(main())


def test_index_builder_and_readers_share_one_decompression(tmp_path):
    async def main():
        async with open_store(_config(tmp_path, index=True)) as store:
            store.index.stop()  # build by hand
            recs = _records(300, ("A",))
            batch = build_batch(recs, base_timestamp=1, compression=LZ4)
            before = _stats()
            await store.put_inner_batch("Idx", 0, batch, 300)
            store.index.build(store)
            assert _since(before) == (1, 0)  # keys read from the payload, records not decoded
            assert [m.queue_offset for m in store.query_by_key("Idx", "key-123")] == [123]
            res = store.get_messages("Idx", 0, 0, 32)
            assert len(decode_message_ext_records(b"".join(pull_body(res)))) == 32
            assert _since(before) == (1, 1)
    run(main())
