"""A master and a slave Broker in one process over a loopback HA port: the slave's log is
the master's byte for byte with frames that cut records (haTransferBatchSize at its
minimum), and what it dispatches (queues, key index, Kafka producer state through
batch_listeners) is what the master has; a slave ahead of its master is refused, or
truncated when told; garbage on the HA port drops only that connection; the wire codec
checks what it is fed."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import socket

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.core.errors import NotMaster
from rocketport.core.metadata.subscription_groups import SubscriptionGroupConfig
from rocketport.core.ha.codec import (
    FrameReader,
    HAProtocolError,
    ReportDecoder,
    encode_frame_header,
    encode_report,
)
from rocketport.core.schedule import SCHEDULE_TOPIC, DelayOffsets
from rocketport.protocols.amqp.queue_args import QueuePolicy
from rocketport.protocols.amqp.vhost import VirtualHost
from rocketport.core.txn.producer_state import SequenceCheck
from tests.support.aio import run
from tests.support.remoting import free_port

SEGMENT = 256 << 10


def configs(tmp_path, ha_port: int, **slave: object) -> tuple[BrokerConfig, BrokerConfig]:
    common = {"mappedFileSizeCommitLog": SEGMENT, "haTransferBatchSize": 4096,
              "haSendHeartbeatInterval": 200}
    master = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "m"),
                                        "brokerRole": "ASYNC_MASTER", "haListenPort": ha_port})
    replica = BrokerConfig.from_mapping({**common, "storePathRootDir": str(tmp_path / "s"),
                                         "brokerRole": "SLAVE", "brokerId": 1,
                                         "haMasterAddress": f"127.0.0.1:{ha_port}", **slave})
    return master, replica


def digest(broker: Broker, end: int) -> str:
    cl, h, offset = broker.store.commitlog, hashlib.sha256(), 0
    while offset < end:
        mf = cl.queue.find(offset)
        n = min(end - offset, mf.file_from_offset + mf.wrote_position - offset)
        h.update(cl.slice(offset, n))
        offset += n
    return h.hexdigest()


async def caught_up(master: Broker, slave: Broker, timeout: float = 20) -> None:
    async def poll() -> None:
        while not (slave.store.dispatched_offset == slave.store.commitlog.max_offset
                   == master.store.commitlog.max_offset):
            await asyncio.sleep(0.01)
    await asyncio.wait_for(poll(), timeout)


async def fill(broker: Broker, n: int, prefix: str = "m") -> None:
    for i in range(n):
        await broker.put_message(Message("T", b"%s-%d" % (prefix.encode(), i) * 30,
                                         {"KEYS": f"{prefix}{i}", "TAGS": "a" if i % 2 else "b"}, 0, i % 4))


def test_the_slave_log_is_the_masters_and_dispatched_as_the_master_did(tmp_path):
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        async with Broker(mc) as master, Broker(sc) as slave:
            await fill(master, 1500)  # several segments, every frame cuts records
            batch = build_batch([Record(i, 0, None, b"k%d" % i) for i in range(5)], producer_id=7,
                                producer_epoch=0, base_sequence=0, base_timestamp=1)
            await master.put_record_batch("K", 0, batch, 5)
            await master.put_message(Message("T", b"later", {"DELAY": "3", "TAGS": "c"}, 0, 0))  # tagsCode: due time
            await caught_up(master, slave)
            end = master.store.commitlog.max_offset
            assert slave.store.commitlog.max_offset == end
            assert digest(slave, end) == digest(master, end)
            assert (SCHEDULE_TOPIC, 2) in master.store.consume_queues  # coded by due time, not TAGS
            for key, cq in master.store.consume_queues.items():  # entries byte for byte: tags codes too
                assert slave.store.consume_queues[key].max_offset == cq.max_offset, key
                assert (bytes(slave.store.consume_queues[key].entries(0, cq.max_offset))
                        == bytes(cq.entries(0, cq.max_offset))), key
            slave.create_topic("T")  # the master's topic table (SlaveSynchronize's copy, over remoting)
            got = slave.get_messages("T", 1, 0, 32)
            assert got.segments and got.next_begin_offset > 0
            assert [m.keys for m in slave.query_by_key("T", "m1201")] == [["m1201"]]
            # the slave's producer state came through batch_listeners: sequence 0 is a duplicate
            assert slave.check_sequence(7, 0, "K", 0, 0, 5)[0] is SequenceCheck.DUPLICATE
            with pytest.raises(NotMaster):
                await slave.put_message(Message("T", b"x", {}, 0, 0))
    run(scenario())


def test_the_slave_indexes_keys_as_it_dispatches_a_record_batch_left_to_the_builder(tmp_path):
    """The slave indexes each received chunk's KEYS and UNIQ_KEY in its dispatch (one bulk put
    a chunk); a Kafka record batch between keyed messages is left to the index builder, which
    walks from it until dispatch may index again: every key is found on the slave."""
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        async with Broker(mc) as master, Broker(sc) as slave:
            def keyed(i: int) -> Message:
                return Message("U", b"u-%d" % i * 20, {"UNIQ_KEY": f"U{i:08d}", "KEYS": f"k{i} j{i}", "TAGS": "t"},
                               0, i % 2)
            for i in range(0, 400, 50):
                await master.put_messages([keyed(j) for j in range(i, i + 50)])
            batch = build_batch([Record(i, 0, b"bk%d" % i, b"v") for i in range(3)], base_timestamp=1)
            await master.put_record_batch("K", 0, batch, 3)
            await master.put_messages([keyed(i) for i in range(400, 500)])
            await caught_up(master, slave)
            slave.create_topic("U")
            slave.create_topic("K")
            for i in (0, 49, 50, 333, 399, 400, 499):
                assert slave.message_by_unique_key("U", f"U{i:08d}").body == b"u-%d" % i * 20
                assert [m.uniq_key for m in slave.query_by_key("U", f"j{i}")] == [f"U{i:08d}"]
            assert slave.query_by_key("K", "bk2")
    run(scenario())


def test_topics_and_groups_created_or_deleted_on_the_master_follow_on_the_slave_through_the_log(tmp_path):
    """Topic and subscription-group changes ride the replicated log (core/ha/metadata_log.py):
    in process there is no SlaveSynchronize, so the slave learns them from the log alone,
    durably (a restart keeps them)."""
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        async with Broker(mc) as master, Broker(sc) as slave:
            await caught_up(master, slave)
            master.create_topic("Fresh", read_queue_nums=3, write_queue_nums=3)
            master.create_topic("Gone")
            master.update_group(SubscriptionGroupConfig("fresh-group", retry_max_times=3))

            async def follows(table, wanted: set[str], unwanted: set[str] = frozenset()) -> None:
                while not (wanted <= set(table.table) and not unwanted & set(table.table)):
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(follows(slave.topics, {"Fresh", "Gone"}), 10)
            await asyncio.wait_for(follows(slave.groups, {"fresh-group"}), 10)
            assert slave.topics.get("Fresh").to_json() == master.topics.get("Fresh").to_json()
            assert slave.groups.get("fresh-group").retry_max_times == 3
            master.delete_topic("Gone")
            master.delete_group("fresh-group")
            await asyncio.wait_for(follows(slave.topics, {"Fresh"}, {"Gone"}), 10)
            await asyncio.wait_for(follows(slave.groups, set(), {"fresh-group"}), 10)
        async with Broker(sc) as slave:
            assert "Fresh" in slave.topics.table and "Gone" not in slave.topics.table
    run(scenario())


def test_amqp_entities_declared_or_deleted_on_the_master_follow_on_the_slave_through_the_log(tmp_path):
    """Durable exchanges, queues (with their arguments) and bindings declared through the
    master's AMQP virtual host ride the replicated log: the slave (no AMQP front-end, no
    SlaveSynchronize) has them in its entity table, keeps them over a restart, and loses
    what the master deletes; a transient queue stays on the master only, as RabbitMQ keeps
    it over no restart. A slave's own virtual host, opened before, takes them up live when the
    slave is made master (what the AMQP front-end does on an election's role change)."""
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        async with Broker(mc) as master, Broker(sc) as slave:
            await caught_up(master, slave)
            vhost = VirtualHost(master, master.amqp_entities)
            vhost.open()
            vhost.declare_queue("old", passive=False, durable=True, exclusive=False, auto_delete=False,
                                arguments=None, owner=None)
            await caught_up(master, slave)
            slave_vhost = VirtualHost(slave, slave.amqp_entities)
            slave_vhost.open()
            assert set(slave_vhost.queues) == {"old"}
            vhost.declare_exchange("orders", "topic", passive=False, durable=True, auto_delete=False,
                                   internal=False, arguments={"alternate-exchange": "amq.fanout"})
            vhost.declare_exchange("audit", "fanout", passive=False, durable=True, auto_delete=False,
                                   internal=False, arguments=None)
            for name, durable in (("eu", True), ("scratch", False)):
                vhost.declare_queue(name, passive=False, durable=durable, exclusive=False, auto_delete=False,
                                    arguments={"x-message-ttl": 60000, "x-max-length": 10}, owner=None)
            vhost.bind("eu", "orders", "eu.#", None, owner=None)
            vhost.bind("eu", "amq.headers", "", {"x-match": "any", "region": "eu"}, owner=None)
            vhost.bind_exchange("audit", "orders", "#", None)
            entities = slave.amqp_entities

            def snapshot(e) -> tuple:
                return ({n: x.to_json() for n, x in e.exchanges.items()},
                        {n: q.to_json() for n, q in e.queues.items() if q.durable},
                        set(e.bindings), set(e.exchange_bindings))

            async def follows(done) -> None:
                while not done():
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(follows(lambda: snapshot(entities) == snapshot(master.amqp_entities)), 10)
            assert "scratch" in master.amqp_entities.queues and "scratch" not in entities.queues
            assert entities.queues["eu"].arguments == {"x-message-ttl": 60000, "x-max-length": 10}
            assert entities.exchanges["orders"].arguments == {"alternate-exchange": "amq.fanout"}
            assert {b.routing_key for b in entities.bindings_of_queue("eu")} == {"eu.#", ""}
            vhost.unbind("eu", "amq.headers", "", {"x-match": "any", "region": "eu"}, owner=None)
            vhost.bind_exchange("audit", "orders", "#", None, unbind=True)
            vhost.delete_exchange("audit", if_unused=False)
            await vhost.delete_queue("old", if_unused=False, if_empty=False, owner=None)
            await asyncio.wait_for(follows(lambda: snapshot(entities) == snapshot(master.amqp_entities)), 10)
            assert "audit" not in entities.exchanges and not entities.exchange_bindings
            wanted = snapshot(master.amqp_entities)
            await slave.ha.set_role("ASYNC_MASTER")  # promoted
            await slave_vhost.take_replicated()
            assert set(slave_vhost.queues) == {"eu"}
            assert slave_vhost.queues["eu"].policy == QueuePolicy.of({"x-message-ttl": 60000, "x-max-length": 10})
            assert slave_vhost.router.routed("orders", "eu.paris", {})
            assert not slave_vhost.router.routed("orders", "us.boston", {})
        async with Broker(sc) as slave:  # what it applied it saved
            assert snapshot(slave.amqp_entities) == wanted
            assert {b.routing_key for b in slave.amqp_entities.bindings_of_queue("eu")} == {"eu.#"}
    run(scenario())


def test_kafka_transaction_state_follows_on_the_slave_through_the_log(tmp_path):
    """The transaction coordinator's lines ride the replicated log: the slave knows each
    transactional id with its producer id and epoch, holds the LSO of an open transaction's
    queue as the master's own restart would, lets it go when the master ends it, and keeps it all over a
    restart; the producer ids it would hand out next are the master's."""
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        async with Broker(mc) as master, Broker(sc) as slave:
            master.create_topic("K")
            await caught_up(master, slave)
            pid, epoch = await master.txn.init_producer("tx-open", 60_000)
            await master.txn.add_partitions("tx-open", pid, epoch, [("K", 0)])
            done_pid, done_epoch = await master.txn.init_producer("tx-done", 60_000)
            await master.txn.add_partitions("tx-done", done_pid, done_epoch, [("K", 1)])
            await master.txn.end_txn("tx-done", done_pid, done_epoch, commit=False)

            def state(broker: Broker) -> dict:
                return {t: (m.producer_id, m.producer_epoch, m.state.value, dict(m.partitions))
                        for t, m in broker.txn.transactions.items()}

            async def follows() -> None:
                while not (state(slave) == state(master) and "CompleteAbort" in str(state(slave))):
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(follows(), 10)
            assert state(slave)["tx-open"][:3] == (pid, epoch, "Ongoing")
            # held from the bound add_partitions logged, as a master's own restart holds it
            assert slave.txn.queues[("K", 0)].open == {pid: 0}
            assert not slave.txn.queues[("K", 1)].open
            assert slave.txn.next_producer_id == master.txn.next_producer_id
            wanted = state(master)
        async with Broker(sc) as slave:
            assert state(slave) == wanted
            assert slave.txn.queues[("K", 0)].open == {pid: 0}
    run(scenario())


def test_delay_levels_progress_follows_on_the_slave_with_the_offset_records(tmp_path):
    """What the master's schedule service delivered (its delay offsets) reaches the slave
    in the replicated offset records, so a promoted slave would not deliver it again; the
    slave writes it on the master's cadence (flushDelayOffsetInterval), not only at a clean
    stop: its delayOffset.json holds it while it runs (what a SIGKILL would leave)."""
    async def scenario() -> None:
        mc, sc = configs(tmp_path, free_port())
        sc.flush_delay_offset_interval = 50
        async with Broker(mc) as master, Broker(sc) as slave:
            await caught_up(master, slave)
            await master.put_message(Message("T", b"in a second", {"DELAY": "1"}, 0, 0))

            async def delivered(broker: Broker) -> None:
                while broker.delay_offsets.table.get(1, 0) < 1:
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(delivered(master), 10)
            await asyncio.wait_for(delivered(slave), 10)
            assert slave.delay_offsets.table[1] == master.delay_offsets.table[1]
            on_disk = DelayOffsets(str(tmp_path / "s" / "config"))

            async def written() -> None:
                while on_disk.table.get(1, 0) < master.delay_offsets.table[1]:
                    await asyncio.sleep(0.02)
                    on_disk.load()
            await asyncio.wait_for(written(), 10)
    run(scenario())


def test_a_slave_ahead_of_its_master_is_refused_or_truncated_when_told(tmp_path):
    async def scenario() -> None:
        port = free_port()
        mc, sc = configs(tmp_path, port)
        async with Broker(mc) as master:
            await fill(master, 100)
        # the would-be slave was once this group's master and wrote what the master never had
        shutil.copytree(tmp_path / "m", tmp_path / "s")
        async with Broker(BrokerConfig.from_mapping({**sc.as_properties(), "brokerRole": "ASYNC_MASTER",
                                                     "brokerId": 0, "haMasterAddress": ""})) as ahead:
            await fill(ahead, 300, "x")
        async with Broker(mc) as master, Broker(sc) as slave:
            async def diverged() -> None:
                while not slave.ha.runtime_info().get("diverged"):
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(diverged(), 10)
            assert slave.store.commitlog.max_offset > master.store.commitlog.max_offset  # nothing merged
        truncating = BrokerConfig.from_mapping({**sc.as_properties(), "haSlaveTruncateDivergent": "true"})
        async with Broker(mc) as master, Broker(truncating) as slave:
            # offsets alone tell a tail the master never had, not bytes that differ below
            # the master's end (that takes the failover's epoch file): the slave is cut
            # back before the master writes on
            await caught_up(master, slave)
            assert slave.store.commitlog.max_offset == master.store.commitlog.max_offset
            await fill(master, 10, "after")
            await caught_up(master, slave)
            end = master.store.commitlog.max_offset
            assert slave.store.commitlog.max_offset == end
            # the divergent tail is cut, the master's records take its place
            assert digest(slave, end) == digest(master, end)
            slave.create_topic("T")
            assert slave.query_by_key("T", "after9")[0].body.startswith(b"after-9")
    run(scenario())


def test_garbage_on_the_ha_port_drops_that_connection_only(tmp_path):
    async def scenario() -> None:
        port = free_port()
        mc, sc = configs(tmp_path, port)
        async with Broker(mc) as master:
            await fill(master, 20)
            for junk in (b"\xff" * 8, b"GET / HTTP/1.1\r\n\r\n", encode_report(1 << 50)):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(junk)
                await writer.drain()
                assert await asyncio.wait_for(reader.read(), 5) is not None  # closed by the master
                writer.close()
            async with Broker(sc) as slave:
                await caught_up(master, slave)
                assert digest(slave, master.store.commitlog.max_offset) == \
                    digest(master, master.store.commitlog.max_offset)
    run(scenario())


def test_the_codec_reassembles_frames_and_refuses_nonsense():
    frames = encode_frame_header(100, 3) + b"abc" + encode_frame_header(103, 0) + encode_frame_header(103, 2) + b"de"
    for step in (1, 5, 13, len(frames)):  # reads that cut headers, frames, or none
        reader, whole, start, data = FrameReader(), [], -1, b""
        for i in range(0, len(frames), step):
            for offset, piece, frame_size in reader.feed(memoryview(frames)[i:i + step]):
                if start < 0:
                    start = offset
                assert offset == start + len(data)  # each piece is the log at its offset
                data += piece
                if frame_size >= 0:  # the piece that ends its frame
                    assert frame_size == len(data)
                    whole.append((start, data))
                    start, data = -1, b""
        assert whole == [(100, b"abc"), (103, b""), (103, b"de")]
    with pytest.raises(HAProtocolError):
        FrameReader(max_frame=10).feed(memoryview(encode_frame_header(0, 11)))
    with pytest.raises(HAProtocolError):
        FrameReader().feed(memoryview(encode_frame_header(-5, 1)))
    reports = ReportDecoder()
    assert reports.feed(encode_report(7)[:3]) == []
    assert reports.feed(encode_report(7)[3:] + encode_report(9)) == [7, 9]
    with pytest.raises(HAProtocolError):
        reports.feed(b"\xff" * 8)
    assert socket  # the module's import keeps loopback tests honest about their sockets


def test_a_lagging_consumer_is_told_to_read_from_the_slave_with_slave_read_enable(tmp_path):
    from rocketport.core.facade.replica import suggested_broker_id

    async def scenario() -> None:
        base = {"storePathRootDir": str(tmp_path / "m"), "mappedFileSizeCommitLog": SEGMENT}
        async with Broker(BrokerConfig.from_mapping(base)) as master:
            await fill(master, 50)
            behind = master.get_messages("T", 0, 0, 4)
            assert suggested_broker_id(master, "g", behind) == 0  # slaveReadEnable off
        lagging = {**base, "slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}
        async with Broker(BrokerConfig.from_mapping(lagging)) as master:
            master.update_group(master.get_group("g"))
            assert suggested_broker_id(master, "g", master.get_messages("T", 0, 0, 4)) == 1
            # nothing read, nothing behind: the master
            assert suggested_broker_id(master, "g", master.get_messages("T", 0, master.max_offset("T", 0), 4)) == 0
    run(scenario())


def test_roles_switch_at_run_time_a_slave_promoted_and_a_master_demoted(tmp_path):
    """The failover's hook (HAService.set_role): the slave becomes a master that takes puts
    and serves its own slaves, the old master becomes its slave and catches up from it."""
    async def scenario() -> None:
        port_a, port_b = free_port(), free_port()
        mc, sc = configs(tmp_path, port_a, haListenPort=port_b)
        async with Broker(mc) as a, Broker(sc) as b:
            await fill(a, 200)
            await caught_up(a, b)
            # a's clients are gone (a failover decided elsewhere): b leads, a follows b
            await b.ha.set_role("ASYNC_MASTER")
            a.config.ha_master_address = f"127.0.0.1:{port_b}"
            await a.ha.set_role("SLAVE")
            with pytest.raises(NotMaster):
                await a.put_message(Message("T", b"x", {}, 0, 0))
            await fill(b, 50, "b")  # the new master writes
            await caught_up(b, a)
            end = b.store.commitlog.max_offset
            assert digest(a, end) == digest(b, end)
            assert a.ha.runtime_info()["masterAddress"] == f"127.0.0.1:{port_b}"
            assert b.ha.runtime_info()["inSyncSlaves"] == 1
    run(scenario())


def test_consumer_offsets_ride_the_replicated_log(tmp_path):
    """Offsets committed on the master reach the slave through the log, in its order, without
    SlaveSynchronize's copy; under SYNC_MASTER offsets_durable returns once the slave has them."""
    async def scenario() -> None:
        port = free_port()
        mc, sc = configs(tmp_path, port)
        sync = BrokerConfig.from_mapping({**mc.as_properties(), "brokerRole": "SYNC_MASTER"})
        async with Broker(sync) as master, Broker(sc) as slave:
            async def connected() -> None:
                while not master.ha.master.in_sync(master.store.commitlog.max_offset):
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(connected(), 10)
            await fill(master, 20)
            await caught_up(master, slave)
            master.commit_offset("g1", "T", 1, 3)
            await master.offsets_durable()  # SYNC_MASTER: answered once the slave has it
            assert slave.query_offset("g1", "T", 1) == 3
            master.commit_offset("g2", "T", 2, 5)  # the periodic record (ASYNC's path) carries it too

            async def applied() -> None:
                while slave.query_offset("g2", "T", 2) != 5:
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(applied(), 10)
            assert master.query_offset("g1", "T", 1) == 3 and "RMQ_SYS_REPLICA_OFFSETS" not in master.topic_names()
            master.delete_group("g1")  # (a STOMP durable subscription removed): its offsets go too
            await master.offsets_durable()
            assert slave.query_offset("g1", "T", 1) == master.query_offset("g1", "T", 1) < 0
            assert slave.query_offset("g2", "T", 2) == 5
    run(scenario())
