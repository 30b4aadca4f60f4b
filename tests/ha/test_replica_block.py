"""A slave catching up a backlog in large reads dispatches runs of plain records in one go
(core/store/replica_block.py): its ConsumeQueues are the master's byte for byte (tags codes
included) and its key index finds every key, for a log that mixes fixed-size messages with
only a UNIQ_KEY, messages of many sizes with TAGS and KEYS over two topics, a DEDUP_KEY, a
Kafka record batch, a delayed message and the metadata records of a topic created on the
master: every kind the block must leave to the per-record path."""

from __future__ import annotations

from rocketport.common.batch import Record, build_batch
from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.core.store import replica
from tests.ha.test_replica_store import caught_up, digest
from tests.support.aio import run
from tests.support.remoting import free_port


def test_a_catch_up_in_large_reads_dispatches_as_the_master_did(tmp_path, monkeypatch):
    blocks: list[int] = []

    def counted(*args, **kwargs):
        block = plain_block(*args, **kwargs)
        if block is not None:
            blocks.append(block.count)
        return block
    plain_block = replica.plain_block
    monkeypatch.setattr(replica, "plain_block", counted)

    async def scenario() -> None:
        port = free_port()
        common = {"mappedFileSizeCommitLog": 1 << 20, "haTransferBatchSize": 256 << 10}  # reads > BLOCK_BYTES
        mc = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "m"),
                                        "brokerRole": "ASYNC_MASTER", "haListenPort": port})
        sc = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "s"), "brokerRole": "SLAVE",
                                        "brokerId": 1, "haMasterAddress": f"127.0.0.1:{port}"})
        async with Broker(mc) as master:
            n = 0
            for chunk in range(6):
                for q in range(3):  # fixed-size messages with only an id
                    await master.put_messages([Message("A", b"a" * 300, {"UNIQ_KEY": f"ID{chunk:04d}{q}{i:025d}"},
                                                       0, q) for i in range(150)])
                for i in range(300):  # many sizes, tags, keys, two topics
                    await master.put_message(Message("B" if i % 3 else "C", b"b%d" % i * (1 + i % 7),
                                                     {"UNIQ_KEY": f"U{n + i}", "KEYS": f"k{n + i} j{n + i}",
                                                      "TAGS": f"t{i % 5}"}, 0, i % 4))
                n += 300
                await master.put_messages([Message("A", b"a" * 300, {"UNIQ_KEY": f"FX{chunk:04d}{i:026d}",
                                                                    "TAGS": "same"}, 0, 1) for i in range(200)])
                if chunk == 2:
                    await master.put_message(Message("B", b"dedup", {"DEDUP_KEY": "d1", "UNIQ_KEY": "ud1"}, 0, 0))
                    batch = build_batch([Record(i, 0, b"bk%d" % i, b"v") for i in range(3)], base_timestamp=1)
                    await master.put_record_batch("K", 0, batch, 3)
                    await master.put_message(Message("B", b"later", {"DELAY": "3", "TAGS": "c"}, 0, 0))
                    master.create_topic("Fresh")
            end = master.store.commitlog.max_offset
            async with Broker(sc) as slave:  # connects now: the whole log is a backlog
                await caught_up(master, slave)
                assert digest(slave, end) == digest(master, end)
                for key, cq in master.store.consume_queues.items():
                    assert slave.store.consume_queues[key].max_offset == cq.max_offset, key
                    assert (bytes(slave.store.consume_queues[key].entries(0, cq.max_offset))
                            == bytes(cq.entries(0, cq.max_offset))), key
                for topic in ("A", "B", "C", "K"):
                    slave.create_topic(topic)
                assert slave.message_by_unique_key("A", f"ID00032{17:025d}").body == b"a" * 300
                assert slave.message_by_unique_key("A", f"FX0005{199:026d}").body == b"a" * 300
                for i in (0, 299, 301, 1000, 1799):
                    topic = "B" if i % 300 % 3 else "C"
                    assert slave.message_by_unique_key(topic, f"U{i}") is not None, i
                    assert [m.uniq_key for m in slave.query_by_key(topic, f"j{i}")] == [f"U{i}"]
                assert slave.message_by_unique_key("B", "ud1").body == b"dedup"
                assert slave.query_by_key("K", "bk2")
    run(scenario())
    # most records went through blocks (the fixed-size ones all of them)
    assert sum(blocks) >= 4000, blocks
