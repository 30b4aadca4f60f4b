"""A full disk through the wire: each front-end answers with its protocol's own error, the
broker stays up and serves reads, and sends succeed again once space returns, without a
restart. Nothing acknowledged is lost and nothing refused is ever read.

Two kinds of full disk: simulated (posix_fallocate raising ENOSPC, as a full file system
answers a new segment's reservation, in every thread) and real (the store on an 8 MiB
tmpfs, its free space taken by a filler file, given back by deleting it; skipped where a
tmpfs cannot be mounted). The broker runs in this process on its own loop; real requests
go over loopback. Two episodes each: the queue's next ConsumeQueue segment (64 entries
here) cannot be made, then the CommitLog's next segment (64 KiB) cannot; in both the
segment's preparation (at half full) fails as well. The index is on throughout: its files
cannot be made either while the disk is full, and the builder waits for space.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketport.common.batch import Record, build_batch, iter_records
from rocketport.common.batch.record_batch import split_batches, verify_crc
from rocketport.core.config import ProtocolConfig
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from rocketport.protocols.remoting import RemotingCommand
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from rocketport.protocols.remoting.messages import decode_message_ext_records
from tests.protocols.kafka.kafka_raw import PRODUCE_V, RawClient
from tests.support.disk import REPO, SimulatedFullDisk, fill_filesystem, mounted_tmpfs
from tests.support.live_broker import LiveBroker, start_live_broker

VALUE = 4000  # bytes per large message: 16 fill a 64 KiB CommitLog segment
CQ_ENTRIES = 64  # small_config's ConsumeQueue segment


class SimulatedDisk(SimulatedFullDisk):
    """A full disk simulated under a temporary directory's store."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(monkeypatch)
        self.store_dir = str(root / "store")


class Tmpfs:
    """A real small file system; ``full = True`` takes all its free space with a filler file,
    ``full = False`` deletes the filler (space returns)."""

    def __init__(self, mount_point: Path) -> None:
        self.mount_point = mount_point
        self.store_dir = str(mount_point / "store")
        self.filler = mount_point / "filler"
        self._full = False

    @property
    def full(self) -> bool:
        return self._full

    @full.setter
    def full(self, full: bool) -> None:
        if full:
            fill_filesystem(self.mount_point, self.filler.name)
            assert os.statvfs(self.mount_point).f_bavail == 0
        else:
            self.filler.unlink()
        self._full = full


@pytest.fixture(params=["simulated", "tmpfs"])
def disk(request, tmp_path, monkeypatch):
    if request.param == "simulated":
        yield SimulatedDisk(tmp_path, monkeypatch)
        return
    with mounted_tmpfs(tmp_path / "disk") as mount_point:
        yield Tmpfs(mount_point)


@pytest.fixture(params=["ASYNC_FLUSH", "SYNC_FLUSH"])
def broker(request, small_config, disk) -> Iterator[LiveBroker]:
    config = dataclasses.replace(
        small_config, store_path_root_dir=disk.store_dir, flush_disk_type=request.param,
        listen_port=0, namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(True, 0),
        message_index_enable=True)  # its files cannot be made either while the disk is full
    live = start_live_broker(config)
    try:
        for topic in ("FullK", "FullR"):
            live.call(live.server.broker.create_topic_ready(topic, read_queue_nums=1,
                                                            write_queue_nums=1))
        yield live
    finally:
        live.stop()


# ------------------------------------------------------------------ the scenario
Send = Callable[[bytes], "tuple[bool, int, str]"]  # body -> (stored, code, remark)


def full_disk_episodes(disk: SimulatedDisk | Tmpfs, send: Send, read_all: Callable[[], list[bytes]],
                       refused_code: int) -> list[bytes]:
    """Both episodes through one protocol; every refusal must be ``refused_code``. Returns
    the acknowledged bodies, in order."""
    acked: list[bytes] = []

    def put(body: bytes) -> bool:
        stored, code, remark = send(body)
        if stored:
            acked.append(body)
        else:
            assert code == refused_code, (code, remark)
            refusals.append(remark)
        return stored

    refusals: list[str] = []
    assert put(b"first")
    # 1. the ConsumeQueue's second segment: sends fit until its first segment is full
    disk.full = True
    for i in range(CQ_ENTRIES + 5):
        put(b"q%03d" % i)
    assert len(acked) == CQ_ENTRIES and len(refusals) == 6, (len(acked), refusals)
    assert read_all() == acked  # reads are served while the disk is full
    disk.full = False  # space returns: the next send is stored, no restart
    assert put(b"after the queue")
    # 2. the CommitLog's second segment: large sends fit until its first segment is full
    disk.full = True
    refusals.clear()
    taken = len(acked)
    for i in range(20):
        put(b"%04d" % i + b"c" * VALUE)
    assert 0 < len(acked) - taken < 16 and refusals, (len(acked) - taken, refusals)
    assert read_all() == acked
    disk.full = False
    for i in range(20):
        assert put(b"%04d" % i + b"d" * VALUE)
    assert read_all() == acked
    assert not isinstance(disk, SimulatedDisk) or disk.refused
    return acked


# ------------------------------------------------------------------ Kafka
def test_kafka_produce_on_a_full_disk_is_a_storage_error_and_resumes(broker, disk):
    with RawClient(broker.port) as client:
        def send(value: bytes) -> tuple[bool, int, str]:
            batch = build_batch([Record(0, 0, None, value)], base_timestamp=1)
            response = client.request(ApiKey.PRODUCE, PRODUCE_V,
                                      client.produce_body("FullK", 0, batch, acks=-1))
            partition = response["responses"][0]["partition_responses"][0]
            return partition["error_code"] == ErrorCode.NONE, partition["error_code"], \
                partition.get("error_message") or ""

        def read_all() -> list[bytes]:
            values: list[bytes] = []
            for _ in range(1000):
                partition = client.fetch("FullK", 0, len(values))
                assert partition["error_code"] == ErrorCode.NONE
                data = bytes(partition["records"] or b"")
                if not data:
                    return values
                for pos, size in split_batches(data):
                    assert verify_crc(data, pos), "a torn or corrupt batch was served"
                    values += [r.value for r in iter_records(data[pos:pos + size])]
            raise AssertionError("fetch did not end")

        full_disk_episodes(disk, send, read_all, ErrorCode.KAFKA_STORAGE_ERROR)


# ------------------------------------------------------------------ remoting
def _send_request(body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader("pg", "FullR", "TBW102", 1, 0, 0, 0, 0, "")
    return request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body)


def _pull_request(offset: int) -> RemotingCommand:
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "cg", "topic": "FullR", "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0"})


def test_remoting_send_on_a_full_disk_is_service_not_available_and_resumes(broker, disk):
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        client = runner.run(RemotingClient.connect(broker.addr))

        def call(command: RemotingCommand) -> RemotingCommand:
            return runner.run(asyncio.wait_for(client.invoke(command), 30))

        def send(body: bytes) -> tuple[bool, int, str]:
            response = call(_send_request(body))
            if response.code == ResponseCode.SERVICE_NOT_AVAILABLE:
                assert "the disk is full" in response.remark, response.remark
            return response.code == ResponseCode.SUCCESS, response.code, response.remark or ""

        def read_all() -> list[bytes]:
            bodies: list[bytes] = []
            for _ in range(1000):
                response = call(_pull_request(len(bodies)))
                if response.code != ResponseCode.SUCCESS:
                    assert response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)
                    return bodies
                bodies += [bytes(m.body) for m in decode_message_ext_records(response.body)]
            raise AssertionError("pull did not end")

        async def pipelined(bodies: list[bytes]) -> list[RemotingCommand]:
            return await asyncio.wait_for(asyncio.gather(
                *(client.invoke(_send_request(body)) for body in bodies)), 30)

        try:
            acked = full_disk_episodes(disk, send, read_all, ResponseCode.SERVICE_NOT_AVAILABLE)
            # sends pipelined on one connection (the send lane serves them under
            # ASYNC_FLUSH, with one append for the lot) until the CommitLog segment is full
            disk.full = True
            bodies = [b"%d" % i + b"p" * 4 * VALUE for i in range(8)]  # 128 KiB in all
            codes = [r.code for r in runner.run(pipelined(bodies))]
            assert set(codes) == {ResponseCode.SUCCESS, ResponseCode.SERVICE_NOT_AVAILABLE}, codes
            acked += [b for b, code in zip(bodies, codes) if code == ResponseCode.SUCCESS]
            assert read_all() == acked
            disk.full = False
            codes = [r.code for r in runner.run(pipelined(bodies))]
            assert set(codes) == {ResponseCode.SUCCESS}
            assert read_all() == acked + bodies
        finally:
            runner.run(client.close())


# ------------------------------------------------------------------ the index
_INDEX_CHILD = """
import asyncio, os, sys
from rocketport.core.config import BrokerConfig
from rocketport.core.errors import DiskFull
from rocketport.common.message import Message
from rocketport.core.store.message_store import MessageStore

sys.path.insert(0, sys.argv[2])  # the repository: tests.support
from tests.support.disk import fill_filesystem as fill

async def main(root):
    config = BrokerConfig(store_path_root_dir=os.path.join(root, "store"),
                          mapped_file_size_commit_log=1 << 20,
                          mapped_file_size_consume_queue=20 * 1024,
                          max_hash_slot_num=1024, max_index_num=4096)
    store = MessageStore(config)
    store.open()
    await store.start()
    await store.put_message(Message("T", b"x", {"KEYS": "k"}, queue_id=0))
    fill(root)
    taken = []
    for i in range(1000):  # fit the segments made before the disk filled
        try:
            await store.put_message(Message("T", b"y" * 100, {"KEYS": "k%d" % i}, queue_id=0))
            taken.append(i)
        except DiskFull:
            pass
    assert taken
    await asyncio.sleep(1.5)  # the index builder tries, and finds no room for its file
    assert store.index.disk_full is not None
    assert store.index.built_offset < store.dispatched_offset
    os.unlink(os.path.join(root, "filler"))  # space returns: the builder resumes by itself
    for _ in range(100):
        if store.index.built_offset == store.dispatched_offset:
            break
        await asyncio.sleep(0.1)
    assert store.index.built_offset == store.dispatched_offset
    found = store.query_by_key("T", "k%d" % taken[-1])
    assert [m.body for m in found] == [b"y" * 100], found
    await store.stop()

asyncio.run(main(sys.argv[1]))
"""


def test_the_index_on_a_full_disk_does_not_kill_the_broker(tmp_path):
    """Index files are backed by disk blocks before the builder writes (their creation and
    each extension fail with DiskFull on a full disk, never SIGBUS on a write): the builder
    waits, the store serves on, and once space returns the builder catches up."""
    with mounted_tmpfs(tmp_path / "disk") as mount_point:
        done = subprocess.run([sys.executable, "-c", _INDEX_CHILD, str(mount_point), REPO],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode} (-7: SIGBUS): {done.stderr[-2000:]}"
