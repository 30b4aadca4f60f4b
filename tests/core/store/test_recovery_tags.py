"""Recovery rebuilds exactly the ConsumeQueue that live dispatch built, tags codes included.

A Kafka record batch is one CommitLog record indexed as one ConsumeQueue entry per record,
each with the tags code of that record's tag header. A rebuild after a crash must give the
entries the same codes; otherwise a tag subscription silently loses records (measured
before the fix: 1,000 of 2,000 alternating A/B records matched ``A`` live, 0 after a
rebuilt ConsumeQueue).

The process test runs a whole broker in a child, produces over Kafka and pulls with tag
subscriptions over remoting, SIGKILLs it, removes the ConsumeQueues and the checkpoint (so
recovery re-dispatches everything from the CommitLog), restarts it and pulls again. The
in-process tests compare the rebuilt entries with the live ones byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from rocketport.common.message import PROPERTY_TAGS
from rocketport.common.tags import tags_code
from rocketport.core.store.message_store import MessageStore
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.messages import decode_message_ext_records

from ...protocols.kafka.kafka_raw import RawClient
from .helpers import crash, run
from .recovery_tags_child import QUEUES, TOPIC

CHILD = os.path.join(os.path.dirname(__file__), "recovery_tags_child.py")
EXPRESSIONS = ("A", "B", "C", "A || B", "*")


# ------------------------------------------------------------------ the data

def _headers(tag: str | None, n: int) -> list[tuple[str, bytes | None]]:
    """A record's headers: the tag header (when ``tag``), between other headers at times."""
    if tag is None:
        return [("h", b"x")] if n % 3 == 0 else []
    if tag == "":
        return [("tag", None)]  # a null header value: no tag
    return [("other", str(n).encode()), ("tag", tag.encode())] if n % 4 == 1 else [("tag", tag.encode())]


def _batch(tags: list[str | None], compression: int) -> bytes:
    records = [Record(i, i, None if i % 2 else f"k{i}".encode(), f"value-{i}".encode() * 3,
                      _headers(t, i)) for i, t in enumerate(tags)]
    return build_batch(records, base_timestamp=int(time.time() * 1000), compression=compression)


# (partition, tags of each record, codec): mixed, uniform, tagless, null-valued and plain
# one-record batches, over every codec
BATCHES: list[tuple[int, list[str | None], int]] = [
    (0, ["A", "B"] * 100, NONE),
    (0, [None if i % 5 == 4 else "AB"[i % 2] for i in range(150)], GZIP),
    (0, ["A"] * 100, LZ4),
    (0, [("A", "B", "C", None)[i % 4] for i in range(120)], ZSTD),
    (0, [None] * 50, SNAPPY),
    (0, ["B"], NONE),
    (0, [None, "", "C", ""] * 10, NONE),
    (0, ["C", "C", "A"] * 20, SNAPPY),
    # the measured case had 2,000 alternating records; fewer here, since a tag-filtered pull
    # decodes such a batch once per match (each match is its own segment)
    (1, ["A", "B"] * 200, LZ4),
    (1, [None] * 300, ZSTD),
    (1, ["B", None] * 40, GZIP),
]


def _expected(expression: str) -> dict[int, list[int]]:
    """Offsets a subscription must get, from the data alone."""
    wanted = None if expression == "*" else {t.strip() for t in expression.split("||")}
    result: dict[int, list[int]] = {q: [] for q in range(QUEUES)}
    for q in range(QUEUES):
        tags = [t for partition, batch, _ in BATCHES if partition == q for t in batch]
        result[q] = [n for n, t in enumerate(tags) if wanted is None or t in wanted]
    return result


# ------------------------------------------------------------------ the child broker

class Child:
    def __init__(self, root: str) -> None:
        self.proc = subprocess.Popen([sys.executable, CHILD, root], stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()
        assert line, "the child broker ended before it was ready"
        self.info = json.loads(line)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


def _produce(port: int) -> None:
    with RawClient(port) as client:
        for partition, tags, codec in BATCHES:
            code, _ = client.produce(TOPIC, partition, _batch(tags, codec))
            assert code == 0


def _pull(offset: int, queue: int, expression: str):
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "tags-group", "topic": TOPIC, "queueId": str(queue),
        "queueOffset": str(offset), "maxMsgNums": "1000", "sysFlag": "4", "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": expression, "subVersion": "0",
        "expressionType": "TAG"})


async def _read(addr: str) -> dict[str, dict[int, list[tuple[int, str | None]]]]:
    """(offset, TAGS) of what each subscription gets, per queue, as a remoting consumer."""
    out: dict[str, dict[int, list[tuple[int, str | None]]]] = {}
    async with await RemotingClient.connect(addr) as client:
        for expression in EXPRESSIONS:
            per_queue = out[expression] = {}
            for queue in range(QUEUES):
                got = per_queue[queue] = []
                offset = 0
                for _ in range(10_000):
                    resp = await client.invoke(_pull(offset, queue, expression))
                    if resp.code == ResponseCode.SUCCESS:
                        got += [(m.queue_offset, m.tags) for m in decode_message_ext_records(resp.body)]
                    else:
                        assert resp.code in (ResponseCode.PULL_NOT_FOUND,
                                             ResponseCode.PULL_RETRY_IMMEDIATELY), resp.code
                    following = int(resp.ext_fields["nextBeginOffset"])
                    if following >= int(resp.ext_fields["maxOffset"]):
                        break
                    assert following > offset
                    offset = following
    return out


def _drop_queues_and_checkpoint(root: str) -> None:
    """Without them recovery re-dispatches the whole CommitLog (a checkpoint may not have
    been written yet when the broker was killed)."""
    shutil.rmtree(os.path.join(root, "consumequeue"))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(root, "checkpoint"))


def test_rebuilt_consume_queue_serves_the_same_tag_subscriptions(tmp_path):
    root = str(tmp_path / "store")
    child = Child(root)
    try:
        _produce(child.info["kafka"])
        before = asyncio.run(_read(child.info["remoting"]))
    finally:
        child.kill()
    for expression in EXPRESSIONS:  # live dispatch is right to begin with
        assert {q: [o for o, _ in got] for q, got in before[expression].items()} == _expected(expression)
    assert len(before["A"][1]) == 200 and len(before["*"][1]) == 780

    _drop_queues_and_checkpoint(root)

    child = Child(root)
    try:
        report = child.info["recovery"]
        assert child.info["crashed"] and report["reason"] == "no checkpoint"
        assert report["redispatched"] == len(BATCHES)
        after = asyncio.run(_read(child.info["remoting"]))
    finally:
        child.kill()
    for expression in EXPRESSIONS:
        assert after[expression] == before[expression], expression


# ------------------------------------------------------------------ in process, byte for byte

def _entries(store: MessageStore, topic: str, queue_id: int) -> bytes:
    cq = store.get_consume_queue(topic, queue_id)
    return bytes(cq.entries(0, cq.max_offset)) if cq is not None else b""


async def _put_live(store: MessageStore, topic: str, queue_id: int, batch: bytes,
                    tags: list[str | None]) -> None:
    """What the Kafka front-end stores: one code per record, TAGS when all records share one."""
    shared = {PROPERTY_TAGS: tags[0]} if len(set(tags)) == 1 and tags[0] else None
    await store.put_inner_batch(topic, queue_id, batch, len(tags),
                                tags_codes=[tags_code(t) for t in tags], properties=shared)


def _rebuild(config, tags_code_of=None) -> MessageStore:
    """Reopen after a crash with no ConsumeQueue and no checkpoint: all re-dispatched."""
    _drop_queues_and_checkpoint(config.store_path_root_dir)
    store = MessageStore(config, tags_code_of=tags_code_of)
    store.open()
    return store


@pytest.mark.parametrize("header", ["tag", "x-tag"])
def test_rebuilt_entries_equal_live_entries(small_config, header):
    config = dataclasses.replace(small_config, kafka_tag_header=header,
                                 mapped_file_size_commit_log=1 << 20)

    def batch(tags, codec):
        records = [Record(i, i, None, b"v%d" % i, [] if t is None else [(header, t.encode())])
                   for i, t in enumerate(tags)]
        return build_batch(records, base_timestamp=1_700_000_000_000, compression=codec)

    async def main() -> dict[tuple[str, int], bytes]:
        store = MessageStore(config)
        store.open()
        await store.start()
        for n, (_, tags, codec) in enumerate(BATCHES):
            await _put_live(store, "T", n % 2, batch(tags, codec), tags)
        # the header's name only in a value, and another header's tag: no tags code
        await _put_live(store, "T", 0, build_batch([Record(0, 0, None, header.encode(), [])],
                                                    base_timestamp=1), [None])
        await _put_live(store, "T", 0, build_batch([Record(0, 0, None, b"v", [("tagx", b"A")])],
                                                    base_timestamp=1), [None])
        live = {k: _entries(store, *k) for k in store.consume_queues}
        await crash(store)
        return live

    live = run(main())
    store = _rebuild(config)
    try:
        assert store.recovery_report["redispatched"] == len(BATCHES) + 2
        assert {k: _entries(store, *k) for k in store.consume_queues} == live
    finally:
        store.close()


def test_custom_tags_code_rule_still_applies_on_rebuild(small_config):
    """A topic whose codes the store's hook decides (delay topics: the due time) keeps the
    hook's code for every entry of its inner batches after a rebuild."""

    def hook(topic: str, properties: dict[str, str]) -> int:
        if topic == "Due":
            return 42
        return tags_code(properties.get(PROPERTY_TAGS)) if properties else 0

    async def main() -> tuple[bytes, bytes]:
        store = MessageStore(small_config, tags_code_of=hook)
        store.open()
        await store.start()
        await store.put_inner_batch("Due", 0, _batch(["A", "B", None], NONE), 3, tags_codes=42)
        await _put_live(store, "Plain", 0, _batch(["A", "B", None], NONE), ["A", "B", None])
        live = _entries(store, "Due", 0), _entries(store, "Plain", 0)
        await crash(store)
        return live

    due, plain = run(main())
    store = _rebuild(small_config, hook)
    try:
        assert _entries(store, "Due", 0) == due
        assert _entries(store, "Plain", 0) == plain
    finally:
        store.close()
