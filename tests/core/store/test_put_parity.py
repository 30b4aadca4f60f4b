"""Every put path packs the same record: the store's header packs held to one reference.

`core/store/writer.py` packs the 88-byte record header in five places (`record_head`,
put_batch's loop and append_sends' single sends inline, and the shared-fields cut of
append_sends' runs and put_message_batch) for speed. Each path here stores the same messages in a fresh store, with the clock fixed, and
its CommitLog bytes and ConsumeQueue entries must equal what `record.encode_record` and the
ConsumeQueue's entry layout say, so any drift between the packs fails here.
"""

from __future__ import annotations

import types

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.common.message import INNER_BATCH_FLAG, PROPERTY_INNER_NUM, Message, encode_properties
from rocketport.common.tags import tags_code
from rocketport.core.store import writer
from rocketport.core.store.consume_queue import CQ_ENTRY
from rocketport.core.store.message_store import PlainSend
from rocketport.core.store.record import QUEUE_OFFSET, encode_record, ip_bytes

from .helpers import open_store, run

NOW_MS = 1_764_000_000_123
BORN_MS = 1_700_000_000_456
HOST = ("10.1.2.3", 4567)
TOPIC = "Parity"
PROPS = {"TAGS": "a", "KEYS": "k1 k2", "custom": "v\u00e9"}
BODIES = [b"first", b"", b"third body " * 20]
FLAG, SYS_FLAG, RECONSUME = 3, 1, 2  # non-zero, so a field packed in the wrong place shows


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    """The writer's clock (its only one) reads NOW_MS: store timestamps are comparable."""
    monkeypatch.setattr(writer, "time", types.SimpleNamespace(time_ns=lambda: NOW_MS * 1_000_000))


def _messages() -> list[Message]:
    return [Message(TOPIC, body, dict(PROPS), FLAG, 0, SYS_FLAG, BORN_MS, HOST, RECONSUME)
            for body in BODIES]


async def _single(store):
    for msg in _messages():
        await store.put_message(msg)


async def _batch(store):
    await store.put_messages(_messages())


async def _message_batch(store):
    batch = encode_batch([BatchMessage(body, dict(PROPS), FLAG) for body in BODIES])
    await store.put_message_batch(TOPIC, 0, batch, sys_flag=SYS_FLAG, born_timestamp=BORN_MS,
                                  born_host=HOST, reconsume_times=RECONSUME)


def _send(bodies: list[bytes]) -> PlainSend:
    return PlainSend(TOPIC, 0, encode_properties(PROPS), bodies, HOST, tags_code("a"), FLAG, SYS_FLAG,
                     BORN_MS, RECONSUME)


async def _sends_one_run(store):
    assert all(type(r) is tuple for r in store.append_sends([_send(list(BODIES))]))


async def _sends_apart(store):
    assert all(type(r) is tuple for r in store.append_sends([_send([body]) for body in BODIES]))


PLAIN_PATHS = {"put_message": _single, "put_messages": _batch, "put_message_batch": _message_batch,
               "append_sends_run": _sends_one_run, "append_sends_apart": _sends_apart}


def _stored(store, topic: str, count: int) -> tuple[bytes, bytes]:
    """(the CommitLog's bytes so far, the first ``count`` entries of queue 0 of ``topic``)."""
    end = store.commitlog.max_offset
    return bytes(store.commitlog.slice(0, end)), bytes(store.consume_queues[(topic, 0)].entries(0, count))


@pytest.mark.parametrize("path", sorted(PLAIN_PATHS))
def test_every_plain_put_path_stores_the_reference_records(small_config, path):
    async def main():
        async with open_store(small_config) as store:
            await PLAIN_PATHS[path](store)
            log, entries = _stored(store, TOPIC, len(BODIES))
            store_ip, store_port = store.store_host[:4], int.from_bytes(store.store_host[4:], "big")
        props = encode_properties(PROPS)
        records, cq, phys = [], [], 0
        for queue_offset, body in enumerate(BODIES):
            record = encode_record(
                topic_bytes=TOPIC.encode(), body=body, props_bytes=props, queue_id=0, flag=FLAG,
                queue_offset=queue_offset, physical_offset=phys, sys_flag=SYS_FLAG,
                born_timestamp=BORN_MS, born_ip=ip_bytes(HOST[0]), born_port=HOST[1],
                store_timestamp=NOW_MS, store_ip=store_ip, store_port=store_port,
                reconsume_times=RECONSUME, prepared_transaction_offset=0)
            records.append(record)
            cq.append(CQ_ENTRY.pack(phys, len(record), tags_code("a")))
            phys += len(record)
        assert log == b"".join(records)
        assert entries == b"".join(cq)
    run(main())


def _record_batch() -> bytes:
    return build_batch([Record(0, 0, b"key", b"value", [("h", b"1")])], base_offset=0,
                       base_timestamp=BORN_MS)


def _inner_reference(store, topic: str, queue_offset: int, phys: int, batch: bytes, *, flag: int,
                     sys_flag: int, born_host: tuple[str, int]) -> bytes:
    return encode_record(
        topic_bytes=topic.encode(), body=QUEUE_OFFSET.pack(queue_offset) + batch[8:],
        props_bytes=encode_properties({PROPERTY_INNER_NUM: "1"}), queue_id=0, flag=flag,
        queue_offset=queue_offset, physical_offset=phys, sys_flag=sys_flag | INNER_BATCH_FLAG,
        born_timestamp=BORN_MS, born_ip=ip_bytes(born_host[0]), born_port=born_host[1],
        store_timestamp=NOW_MS, store_ip=store.store_host[:4],
        store_port=int.from_bytes(store.store_host[4:], "big"), reconsume_times=0,
        prepared_transaction_offset=0)


def test_inner_and_control_batches_store_the_reference_record(small_config):
    """put_inner_batch (with its own flag, sys flag and host) and put_control_batch (a
    marker into two queues in one write) against the same reference encoder; the
    ConsumeQueue entry of an inner batch carries the record size negated."""
    batch = _record_batch()

    async def main():
        async with open_store(small_config) as store:
            await store.put_inner_batch(TOPIC, 0, batch, 1, tags_codes=7, born_timestamp=BORN_MS,
                                        born_host=HOST, flag=FLAG, sys_flag=SYS_FLAG)
            log, entries = _stored(store, TOPIC, 1)
            inner = _inner_reference(store, TOPIC, 0, 0, batch, flag=FLAG, sys_flag=SYS_FLAG, born_host=HOST)
            assert log == inner
            assert entries == CQ_ENTRY.pack(0, -len(inner), 7)
        control_config = small_config.with_overrides(
            store_path_root_dir=small_config.store_path_root_dir + "-control")
        async with open_store(control_config) as store:
            await store.put_control_batch([(TOPIC, 0), ("Other", 0)], batch, BORN_MS)
            log, first = _stored(store, TOPIC, 1)
            second = bytes(store.consume_queues[("Other", 0)].entries(0, 1))
            marker = _inner_reference(store, TOPIC, 0, 0, batch, flag=0, sys_flag=0,
                                      born_host=("127.0.0.1", 0))
            other = _inner_reference(store, "Other", 0, len(marker), batch, flag=0, sys_flag=0,
                                     born_host=("127.0.0.1", 0))
            assert log == marker + other
            assert (first, second) == (CQ_ENTRY.pack(0, -len(marker), 0),
                                       CQ_ENTRY.pack(len(marker), -len(other), 0))
    run(main())
