"""Inner batches (Kafka record batches) filtered per record after a pull."""

from __future__ import annotations

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.messages import record_properties
from rocketport.common.tags import tags_code
from rocketport.core.broker import Broker
from rocketport.core.filter import compile_filter
from rocketport.core.store.inner_batch import matching_records
from tests.support.aio import run


def _records() -> list[Record]:
    out = []
    for i in range(10):
        headers = [("TAGS", b"A" if i % 3 == 0 else b"B"), ("n", str(i).encode()), ("nil", None)]
        out.append(Record(i, 0, None, f"v{i}".encode(), headers))
    return out


def test_headers_map_to_properties():
    props = record_properties(b"k", [("a", b"1"), ("b", None), ("a", b"\xff"), ("tag", b"red")])
    assert props == {"a": "\udcff", "tag": "red", "KEYS": "k", "TAGS": "red"}
    assert record_properties(None, [("TAGS", b"x"), ("tag", b"y")]) == {"TAGS": "x", "tag": "y"}


def test_pull_then_per_record_tag_and_sql(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("K", read_queue_nums=1, write_queue_nums=1)
            recs = _records()
            batch = build_batch(recs, base_timestamp=1)
            codes = [tags_code(dict(r.headers)["TAGS"].decode()) for r in recs]
            await broker.put_record_batch("K", 0, batch, len(recs), tags_codes=codes)
            tag = compile_filter("TAG", "A")
            r = await broker.pull("g", "K", 0, 0, 32, message_filter=tag)
            # the tagsCode prefilter already cut the batch into the matching offsets
            assert all(seg.is_inner_batch for seg in r.segments)
            assert [o for seg in r.segments for o, _ in matching_records(seg, tag)] == [0, 3, 6, 9]
            sql = compile_filter("SQL92", "n > 4 AND nil IS NULL")
            r = await broker.pull("g", "K", 0, 2, 32, message_filter=sql)
            got = [(o, rec.value) for seg in r.segments for o, rec in matching_records(seg, sql)]
            assert got == [(o, f"v{o}".encode()) for o in range(5, 10)]
            r = await broker.pull("g", "K", 0, 8, 32)
            assert [o for seg in r.segments for o, _ in matching_records(seg, None)] == [8, 9]
    run(main())
