"""OffsetCommit conformance: commit metadata kept (and persisted) with the offset, its size
limit, and zombie commits refused by generation and membership as Kafka's coordinator does."""

from __future__ import annotations

import asyncio

from confluent_kafka import Consumer, TopicPartition
from rocketport.protocols.kafka.coordinator import GroupCoordinator, GroupState
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey

from tests.support.kafka import start_broker

from .kafka_raw import RawClient
from .test_kafka_coordinator import join_v4

COMMIT_V = 8
FETCH_V = 8


def commit(client: RawClient, group: str, topic: str, offset: int, metadata: str | None, *,
           generation: int = -1, member: str = "", version: int = COMMIT_V) -> int:
    r = client.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": metadata}]}]})
    return r["topics"][0]["partitions"][0]["error_code"]


def fetch_committed(client: RawClient, group: str, topic: str) -> dict:
    r = client.request(ApiKey.OFFSET_FETCH, FETCH_V, {
        "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
        "require_stable": False})
    return r["groups"][0]["topics"][0]["partitions"][0]


def test_commit_metadata_is_returned_limited_and_kept_across_restart(tmp_path):
    store = str(tmp_path / "store")
    live = start_broker(store)
    try:
        live.run(lambda: live.server.broker.create_topic("meta", read_queue_nums=1, write_queue_nums=1))
        with RawClient(live.port) as client:
            assert commit(client, "g", "meta", 7, "checkpoint-7") == ErrorCode.NONE
            p = fetch_committed(client, "g", "meta")
            assert (p["committed_offset"], p["metadata"]) == (7, "checkpoint-7")
            # offset.metadata.max.bytes (4,096): larger is refused and nothing is written
            assert commit(client, "g", "meta", 9, "x" * 4097) == ErrorCode.OFFSET_METADATA_TOO_LARGE
            assert commit(client, "g", "meta", 8, "y" * 4096) == ErrorCode.NONE
            assert commit(client, "g", "meta", 10, "ünïcode ✓") == ErrorCode.NONE
    finally:
        live.stop()
    live = start_broker(store)
    try:
        with RawClient(live.port) as client:
            p = fetch_committed(client, "g", "meta")
            assert (p["committed_offset"], p["metadata"]) == (10, "ünïcode ✓")
        # and a real client sees it through committed()
        consumer = Consumer({"bootstrap.servers": live.bootstrap, "group.id": "g"})
        try:
            (tp,) = consumer.committed([TopicPartition("meta", 0)], timeout=20)
            assert (tp.offset, tp.metadata) == (10, "ünïcode ✓")
            consumer.commit(offsets=[TopicPartition("meta", 0, 11, metadata="by-librdkafka")],
                            asynchronous=False)
            (tp,) = consumer.committed([TopicPartition("meta", 0)], timeout=20)
            assert (tp.offset, tp.metadata) == (11, "by-librdkafka")
        finally:
            consumer.close()
    finally:
        live.stop()


def test_zombie_commits_are_refused_live(live_broker):
    live_broker.run(lambda: live_broker.server.broker.create_topic("z", read_queue_nums=1, write_queue_nums=1))
    with RawClient(live_broker.port) as client:
        # a generation naming a group the coordinator does not know: an old generation
        assert commit(client, "ghost", "z", 3, None, generation=4, member="m-1") == ErrorCode.ILLEGAL_GENERATION
        # from v9 (KIP-848's version) Kafka names the cause: the group does not exist
        assert commit(client, "ghost", "z", 3, None, generation=4, member="m-1", version=9) \
            == ErrorCode.GROUP_ID_NOT_FOUND
        # generation -1 without a member: offset storage for a group without membership
        assert commit(client, "simple", "z", 3, None) == ErrorCode.NONE
    offsets = live_broker.run(live_broker.server.broker.group_offsets, "ghost")
    assert offsets == {}


def test_zombie_commit_rules():
    async def scenario():
        coord = GroupCoordinator()
        a = await join_v4(coord)
        await coord.sync("g", 1, a.member_id, None, {a.member_id: b"all"})
        assert coord.validate_commit("g", 1, a.member_id, None) == ErrorCode.NONE
        # generation -1 without membership is only for Empty groups
        assert coord.validate_commit("g", -1, "", None) == ErrorCode.UNKNOWN_MEMBER_ID
        assert coord.validate_commit("g", 0, a.member_id, None) == ErrorCode.ILLEGAL_GENERATION
        assert coord.validate_commit("g", 1, "stranger", None) == ErrorCode.UNKNOWN_MEMBER_ID

        # a second member joins: while the group prepares the rebalance, a member of the
        # current generation may still commit (eager clients commit before revoking)
        task = asyncio.ensure_future(join_v4(coord))
        await asyncio.sleep(0.05)
        assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert coord.validate_commit("g", 1, a.member_id, None) == ErrorCode.NONE
        ra = await coord.join("g", a.member_id, None, "client", "127.0.0.1", 6000, 2000, "consumer",
                              [("range", b"sub-a")], require_known_member_id=True)
        b = await task
        assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
        # the revoked generation is a zombie now; the current one waits for the sync
        assert coord.validate_commit("g", 1, a.member_id, None) == ErrorCode.ILLEGAL_GENERATION
        assert coord.validate_commit("g", 2, b.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
        await asyncio.gather(coord.sync("g", 2, ra.member_id, None, {ra.member_id: b"p0", b.member_id: b"p1"}),
                             coord.sync("g", 2, b.member_id, None, {}))
        assert coord.validate_commit("g", 2, b.member_id, None) == ErrorCode.NONE

        # a member that left: its commits are refused; once the group is Empty, -1 is fine
        assert coord.leave("g", b.member_id, None) == ErrorCode.NONE
        assert coord.validate_commit("g", 2, b.member_id, None) == ErrorCode.UNKNOWN_MEMBER_ID
        coord.leave("g", ra.member_id, None)
        assert coord.groups["g"].state is GroupState.EMPTY
        assert coord.validate_commit("g", 2, ra.member_id, None) == ErrorCode.UNKNOWN_MEMBER_ID
        assert coord.validate_commit("g", -1, "", None) == ErrorCode.NONE
        coord.close()

    asyncio.run(scenario())


def test_static_member_zombie_is_fenced():
    async def scenario():
        coord = GroupCoordinator()
        r = await coord.join("g", "", "instance-1", "client", "127.0.0.1", 6000, 2000, "consumer",
                             [("range", b"s")], require_known_member_id=True)
        await coord.sync("g", r.generation_id, r.member_id, "instance-1", {r.member_id: b"all"})
        # the instance restarts: its earlier incarnation is a zombie
        r2 = await coord.join("g", "", "instance-1", "client", "127.0.0.1", 6000, 2000, "consumer",
                              [("range", b"s")], require_known_member_id=True)
        assert coord.validate_commit("g", r.generation_id, r.member_id, "instance-1") == ErrorCode.FENCED_INSTANCE_ID
        await coord.sync("g", r2.generation_id, r2.member_id, "instance-1", {r2.member_id: b"all"})
        assert coord.validate_commit("g", r2.generation_id, r2.member_id, "instance-1") == ErrorCode.NONE
        coord.close()

    asyncio.run(scenario())
