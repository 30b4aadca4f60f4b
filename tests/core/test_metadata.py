import asyncio
import json
import os

from rocketport.core.broker import Broker
from rocketport.core.metadata.json_file import JsonFile
from rocketport.core.metadata.offsets import ConsumerOffsetManager


def test_json_file_falls_back_to_backup(tmp_path):
    f = JsonFile(str(tmp_path / "x.json"))
    f.save({"v": 1})
    f.save({"v": 2})
    assert f.load() == {"v": 2}
    (tmp_path / "x.json").write_text("{broken")
    assert f.load() == {"v": 1}
    (tmp_path / "x.json").unlink()
    assert f.load() == {"v": 1}


def test_consumer_offsets_layout(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit("g", "T", 0, 5)
    m.commit("g", "T", 1, 7)
    m.persist()
    data = json.loads((tmp_path / "consumerOffset.json").read_text())
    assert data == {"offsetTable": {"T@g": {"0": 5, "1": 7}}}
    m2 = ConsumerOffsetManager(str(tmp_path))
    m2.load()
    assert m2.query("g", "T", 1) == 7 and m2.query("g", "T", 2) == -1
    assert m2.groups_of("T") == {"g"} and m2.topics_of("g") == {"T"}


def test_offset_msg_id_template_formats_what_offset_msg_id_returns():
    from rocketport.common.message_id import decode_offset_msg_id, offset_msg_id, offset_msg_id_template
    from rocketport.core.store.message_store import PutResult

    host = bytes([10, 0, 0, 7]) + (10911).to_bytes(4, "big")
    template = offset_msg_id_template(host)
    for offset in (0, 1, 123_456_789, 2**40 + 7, 2**63 - 1):
        assert (template % offset).decode() == offset_msg_id(host, offset)
        assert decode_offset_msg_id((template % offset).decode()).commit_log_offset == offset
    batch = PutResult(0, 0, 100, 30, 0, 3, host, (100, 110, 120))
    assert batch.joined_msg_ids == ",".join(batch.msg_ids)


def test_concurrent_saves_of_one_file_all_succeed(tmp_path):
    """Saves run in worker threads (a persist loop beside a request): they must not take
    each other's temp file away (FileNotFoundError was seen under load)."""
    import threading

    from rocketport.core.metadata.json_file import JsonFile

    file = JsonFile(str(tmp_path / "state.json"))
    errors: list[BaseException] = []

    def saver(n: int) -> None:
        try:
            for i in range(200):
                file.save({"writer": n, "i": i})
        except BaseException as exc:  # collected: the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=saver, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert file.load()["i"] == 199


def test_offsets_durable_returns_once_the_commits_are_on_disk(small_config):
    """What a Kafka OffsetCommit is answered after: the file holds every commit made before
    the call, whatever flushConsumerOffsetInterval says (an hour here)."""
    config = small_config.with_overrides(flush_consumer_offset_interval=3_600_000)

    async def main():
        async with Broker(config) as broker:
            broker.create_topic("T")
            for queue_id in range(4):
                broker.commit_offset("g", "T", queue_id, 10 + queue_id)
            waiters = [asyncio.create_task(broker.offsets_durable()) for _ in range(3)]
            broker.commit_offset("g", "T", 0, 99)  # after the first waiters, before they return
            await broker.offsets_durable()
            await asyncio.gather(*waiters)
            on_disk = ConsumerOffsetManager(os.path.join(config.store_path_root_dir, "config"))
            on_disk.load()
            assert on_disk.offsets_of("g", "T") == {0: 99, 1: 11, 2: 12, 3: 13}
    asyncio.run(main())


def test_topic_changes_are_appended_and_survive_a_torn_last_line(tmp_path):
    """Each topic change is one line of topics.json.log (not the table rewritten: creating
    N topics was O(N^2)); a restart folds the log into topics.json, a torn last line (a
    crash mid-append, never acknowledged) is dropped and later appends are kept."""
    from rocketport.core.metadata.topics import TopicConfig, TopicConfigManager

    topics = TopicConfigManager(str(tmp_path))
    topics.load()
    for i in range(5):
        topics.put(TopicConfig(f"T{i}", 4, 4))
    with topics.deferred():  # one append for all of them
        for i in range(5, 50):
            topics.put(TopicConfig(f"T{i}", 2, 2))
        assert len((tmp_path / "topics.json.log").read_bytes().splitlines()) == 5
    topics.remove("T3")
    assert not (tmp_path / "topics.json").exists()
    assert len((tmp_path / "topics.json.log").read_bytes().splitlines()) == 51
    with open(tmp_path / "topics.json.log", "ab") as log:
        log.write(b'{"put": {"topicName": "torn"')

    again = TopicConfigManager(str(tmp_path))
    again.load()
    assert sorted(again.table) == sorted(f"T{i}" for i in range(50) if i != 3)
    assert again.table["T7"].write_queue_nums == 2 and again.data_version == 51
    assert not (tmp_path / "topics.json.log").exists()  # folded into topics.json
    again.put(TopicConfig("after", 1, 1))
    third = TopicConfigManager(str(tmp_path))
    third.load()
    assert "after" in third.table and "torn" not in third.table
