"""Transactional messages: half, commit, rollback, check-back, discard, restart."""

from __future__ import annotations

import asyncio

import pytest

from rocketport.common.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    Message,
    transaction_type,
)
from rocketport.core.broker import Broker
from rocketport.core.errors import MessageNotFound, TransactionMismatch
from rocketport.core.half_messages import CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC
from tests.support.aio import run


def _prepared(body: bytes = b"tx", **props) -> Message:
    return Message("T", body, {"TRAN_MSG": "true", "PGROUP": "P", "TAGS": "A", **props}, queue_id=1)


def _stored_ms(broker: Broker, put) -> int:
    return broker.message_by_offset(put.commit_log_offset).store_timestamp


async def _check_round_after(broker: Broker, ms: int) -> None:
    """Until a check round that began at or after ``ms`` (wall) has finished: a barrier on
    the check-back's own progress, to show what it did not do."""
    for _ in range(300):
        if broker.transactions.stats.last_round_ms >= ms:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no check round began after {ms}")


async def _visible(broker: Broker) -> list:
    r = await broker.pull("g", "T", 1, 0, 64)
    return list(r.messages())


def test_commit_makes_the_real_message_visible(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            half = await broker.put_message(_prepared())
            assert half.queue_id == 1
            stored = broker.message_by_offset(half.commit_log_offset)
            assert stored.topic == HALF_TOPIC and stored.properties["REAL_TOPIC"] == "T"
            assert stored.properties["REAL_QID"] == "1"
            assert await _visible(broker) == []
            r = await broker.end_transaction("P", half.commit_log_offset, True)
            [m] = await _visible(broker)
            assert m.commit_log_offset == r.commit_log_offset and m.body == b"tx" and m.tags == "A"
            assert transaction_type(m.sys_flag) == TRANSACTION_COMMIT_TYPE
            assert m.prepared_transaction_offset == half.commit_log_offset
            for gone in ("TRAN_MSG", "REAL_TOPIC", "REAL_QID"):
                assert gone not in m.properties
            assert broker.max_offset(OP_TOPIC, 0) == 1
    run(main())


def test_prepared_sys_flag_alone_makes_a_half(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            r = await broker.put_message(Message("T", b"x", {"PGROUP": "P"}, queue_id=0,
                                                 sys_flag=TRANSACTION_PREPARED_TYPE))
            assert broker.message_by_offset(r.commit_log_offset).topic == HALF_TOPIC
            assert broker.max_offset("T", 0) == 0
    run(main())


def test_rollback_hides_and_is_never_checked(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            asked = []
            broker.add_transaction_checker(lambda g, h: asked.append(h) or True)
            half = await broker.put_message(_prepared())
            assert await broker.end_transaction("P", half.commit_log_offset, False) is None
            await _check_round_after(broker, _stored_ms(broker, half) + sem_config.transaction_time_out)
            assert asked == [] and await _visible(broker) == []
    run(main())


def test_unknown_is_checked_back_and_answered(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            asked = []

            def checker(group, half):
                asked.append((group, half))
                asyncio.get_running_loop().create_task(
                    broker.end_transaction(group, half.commit_log_offset, True, from_check=True))
                return True

            broker.add_transaction_checker(checker)
            half = await broker.put_message(_prepared())
            assert await broker.end_transaction("P", half.commit_log_offset, None) is None
            for _ in range(100):
                if await _visible(broker):
                    break
                await asyncio.sleep(0.02)
            [(group, checked)] = asked
            assert group == "P" and checked.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert checked.body == b"tx"
            # a round that found the checked copy past its timeout asked nothing more
            await _check_round_after(broker, checked.store_timestamp + sem_config.transaction_time_out)
            assert len(asked) == 1 and len(await _visible(broker)) == 1
    run(main())


def test_unanswered_half_is_discarded_after_check_max(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            asked = []
            broker.add_transaction_checker(lambda g, h: asked.append(h) or True)
            await broker.put_message(_prepared())
            for _ in range(200):
                if broker.max_offset(CHECK_MAX_TIME_TOPIC, 0):
                    break
                await asyncio.sleep(0.02)
            assert [h.properties["TRANSACTION_CHECK_TIMES"] for h in asked] == ["1", "2", "3"]
            assert broker.transactions.stats.discarded == 1
            await _check_round_after(broker, asked[-1].store_timestamp + sem_config.transaction_time_out)
            assert len(asked) == 3
    run(main())


def test_errors_are_typed(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            plain = await broker.put_message(Message("T", b"x", queue_id=0))
            with pytest.raises(MessageNotFound):
                await broker.end_transaction("P", plain.commit_log_offset, True)
            half = await broker.put_message(_prepared())
            with pytest.raises(TransactionMismatch):
                await broker.end_transaction("other", half.commit_log_offset, True)
    run(main())


def test_pending_half_is_checked_after_restart(sem_config):
    slow = sem_config.with_overrides(transaction_check_interval=60_000)

    async def main():
        async with Broker(slow) as broker:
            broker.create_topic("T", read_queue_nums=2, write_queue_nums=2)
            resolved = await broker.put_message(_prepared(b"done"))
            await broker.end_transaction("P", resolved.commit_log_offset, False)
            await broker.put_message(_prepared(b"pending"))
        async with Broker(sem_config) as broker:
            asked = []
            broker.add_transaction_checker(lambda g, h: asked.append(h.body) or True)
            for _ in range(100):
                if asked:
                    break
                await asyncio.sleep(0.02)
            assert asked == [b"pending"]
    run(main())
