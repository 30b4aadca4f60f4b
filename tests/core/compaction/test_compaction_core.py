"""Compaction through the Broker facade (core/compaction), without a protocol: plain
(RocketMQ-style) messages keyed by KEYS compact as Kafka records do and every reader of
`get_messages` sees the compacted view; rewritten batches keep their offsets and a valid
CRC; a snapshot is whole or absent (a killed compaction's .tmp is removed at load)."""

from __future__ import annotations

import asyncio
import os

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.record_batch import iter_records, verify_crc
from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.compaction.policy import CompactionPolicy, is_compacted
from rocketport.core.compaction.snapshot import latest_snapshot


def run(coro):
    return asyncio.run(coro)


def _compacted(broker: Broker, topic: str, queues: int = 1) -> None:
    broker.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    broker.set_topic_attributes(topic, {"cleanup.policy": "compact"})


def test_plain_messages_compact_by_their_keys_and_every_reader_sees_the_latest(small_config):
    async def main():
        async with Broker(small_config) as broker:
            _compacted(broker, "plain")
            for i in range(60):
                await broker.put_message(Message("plain", b"v%d" % i, {"KEYS": "k%d" % (i % 6)}, queue_id=0))
            await broker.put_message(Message("plain", b"keyless", queue_id=0))
            assert await broker.compaction.compact("plain", 0, CompactionPolicy(), force=True)
            got = broker.get_messages("plain", 0, 0, 100)
            seen = [(m.queue_offset, m.properties.get("KEYS", ""), m.body) for m in got.messages()]
            assert seen == [(54 + i, "k%d" % i, b"v%d" % (54 + i)) for i in range(6)] + [(60, "", b"keyless")]
            assert broker.min_offset("plain", 0) == 0 and broker.max_offset("plain", 0) == 61
            # a read at a removed offset starts at the next kept one
            assert [m.queue_offset for m in broker.get_messages("plain", 0, 10, 2).messages()] == [54, 55]
    run(main())


def test_a_batch_that_loses_records_is_rewritten_with_its_offsets_and_a_valid_crc(small_config):
    async def main():
        async with Broker(small_config) as broker:
            _compacted(broker, "batches")
            first = [Record(i, i, b"k%d" % (i % 3), b"a%d" % i) for i in range(5)]
            await broker.put_record_batch("batches", 0, build_batch(first, base_timestamp=1000, compression=1), 5)
            second = [Record(0, 0, b"k0", b"b0")]
            await broker.put_record_batch("batches", 0, build_batch(second, base_timestamp=2000), 1)
            assert await broker.compaction.compact("batches", 0, CompactionPolicy(), force=True)
            result = broker.get_messages("batches", 0, 0, 100)
            bodies = []
            for seg in result.segments:
                body = bytes(seg.view[88:88 + int.from_bytes(seg.view[84:88], "big")])
                assert verify_crc(body)
                bodies.append(body)
            first_batch = list(iter_records(bodies[0]))
            # offsets 0..4 held keys k0 k1 k2 k0 k1: k2 (2), k1 (4) stay; k0's last is offset 5
            assert [(r.offset_delta, r.key, r.value) for r in first_batch] == [(2, b"k2", b"a2"), (4, b"k1", b"a4")]
            assert int.from_bytes(bodies[0][:8], "big") == 0 and bodies[0][22] & 0x07 == 1  # base offset, codec
            assert [m.queue_offset for m in result.messages()] == [2, 4, 5]
    run(main())


def test_a_killed_compactions_tmp_is_removed_and_the_previous_snapshot_stays(small_config):
    async def main():
        async with Broker(small_config) as broker:
            _compacted(broker, "kept")
            for i in range(10):
                await broker.put_message(Message("kept", b"v%d" % i, {"KEYS": "k%d" % (i % 2)}, queue_id=0))
            assert await broker.compaction.compact("kept", 0, CompactionPolicy(), force=True)
            return broker.compaction._dir("kept", 0)
    directory = run(main())
    with open(os.path.join(directory, "compacting.tmp"), "wb") as f:
        f.write(b"half a compaction")
    snap = latest_snapshot(directory)
    assert snap is not None and (snap.start, snap.end, snap.messages) == (0, 10, 2)
    assert sorted(os.listdir(directory)) == [f"{10:020d}.clog"]
    snap.close()

    async def again():
        async with Broker(small_config) as broker:
            assert [m.body for m in broker.get_messages("kept", 0, 0, 10).messages()] == [b"v8", b"v9"]
    run(again())


def test_the_policy_names_kafka_and_rocketmq_spellings():
    assert is_compacted({"cleanup.policy": "compact,delete"})
    assert is_compacted({"+cleanup.policy": "COMPACTION"})
    assert not is_compacted({"cleanup.policy": "delete"}) and not is_compacted({})
    policy = CompactionPolicy.of({"min.cleanable.dirty.ratio": "0.2", "delete.retention.ms": "5"})
    assert (policy.min_cleanable_dirty_ratio, policy.delete_retention_ms) == (0.2, 5)


def test_max_compaction_lag_compacts_a_queue_whose_dirty_ratio_is_below_the_minimum(small_config):
    async def main():
        async with Broker(small_config) as broker:
            _compacted(broker, "lag")
            for i in range(20):
                await broker.put_message(Message("lag", b"a%d" % i, {"KEYS": "k%d" % (i % 4)}, queue_id=0))
            assert await broker.compaction.run_once() == 1  # nothing clean yet: all dirty
            await broker.put_message(Message("lag", b"b", {"KEYS": "k0"}, queue_id=0))
            broker.set_topic_attributes("lag", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.9"})
            assert await broker.compaction.run_once() == 0  # 1 dirty of 5
            await asyncio.sleep(0.01)
            broker.set_topic_attributes("lag", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.9",
                                                "max.compaction.lag.ms": "5"})
            assert await broker.compaction.run_once() == 1  # its dirty record is older than 5 ms
            assert [m.body for m in broker.get_messages("lag", 0, 0, 10).messages()] == [b"a17", b"a18", b"a19", b"b"]
    run(main())


def test_a_rocketmq_pull_reads_the_compacted_view_and_a_selective_filter_the_commit_log(small_config):
    from rocketport.core.filter import compile_filter

    async def main():
        async with Broker(small_config) as broker:
            _compacted(broker, "pulled")
            for i in range(30):
                tag = "A" if i % 2 else "B"
                await broker.put_message(Message("pulled", b"v%d" % i, {"KEYS": "k%d" % (i % 3), "TAGS": tag},
                                                 queue_id=0))
            assert await broker.compaction.compact("pulled", 0, CompactionPolicy(), force=True)
            result = await broker.pull("g", "pulled", 0, 0, 32)
            assert [m.body for m in result.messages()] == [b"v27", b"v28", b"v29"]
            assert [m.body for m in broker.pull_now("g", "pulled", 0, 0, 32).messages()] == [b"v27", b"v28", b"v29"]
            tagged = await broker.pull("g", "pulled", 0, 0, 32, message_filter=compile_filter("TAG", "A"))
            assert len(list(tagged.messages())) == 15  # read from the CommitLog, every A
    run(main())


def test_with_compaction_off_nothing_compacts_and_retention_is_not_held_back(small_config):
    async def main():
        async with Broker(small_config.with_overrides(enable_compaction=False)) as broker:
            _compacted(broker, "off")
            for i in range(10):
                await broker.put_message(Message("off", b"v%d" % i, {"KEYS": "k"}, queue_id=0))
            assert await broker.compaction.run_once() == 0
            assert broker.compaction.retention_floor() == 1 << 62
            assert len(list(broker.get_messages("off", 0, 0, 32).messages())) == 10
    run(main())
