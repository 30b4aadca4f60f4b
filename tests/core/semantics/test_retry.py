"""Send-back: %RETRY%{group} through the schedule, %DLQ%{group} after max reconsume times."""

from __future__ import annotations

import time

import pytest

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.errors import MessageNotFound
from rocketport.core.metadata.subscription_groups import SubscriptionGroupConfig
from rocketport.core.metadata.topics import PERM_WRITE
from rocketport.core.schedule import SCHEDULE_TOPIC
from tests.support.aio import run


async def _stored(broker: Broker, topic: str = "T", **props):
    r = await broker.put_message(Message(topic, b"payload", {"TAGS": "A", **props}, queue_id=0))
    return broker.message_by_offset(r.commit_log_offset)


def test_first_send_back_waits_level_three_in_the_schedule(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            msg = await _stored(broker)
            r = await broker.send_back("g", msg.commit_log_offset)
            parked = broker.message_by_offset(r.commit_log_offset)
            assert parked.topic == SCHEDULE_TOPIC and parked.queue_id == 2  # level 3
            p = parked.properties
            assert p["REAL_TOPIC"] == "%RETRY%g" and p["DELAY"] == "3"
            assert p["RETRY_TOPIC"] == "T" and p["RECONSUME_TIME"] == "1" and p["TAGS"] == "A"
            assert p["ORIGIN_MESSAGE_ID"] == _offset_id(broker, msg.commit_log_offset)
            assert parked.reconsume_times == 1
            cfg = broker.get_topic("%RETRY%g")
            assert cfg.read_queue_nums == cfg.write_queue_nums == 1
    run(main())


def _offset_id(broker: Broker, offset: int) -> str:
    return (broker.store.store_host + offset.to_bytes(8, "big")).hex().upper()


def test_retry_is_delivered_and_keeps_origin_across_hops(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            msg = await _stored(broker)
            sent = time.time_ns() // 1_000_000
            await broker.send_back("g", msg.commit_log_offset, delay_level=1, origin_msg_id="ORIG")
            r = await broker.pull("g", "%RETRY%g", 0, 0, 8, hold_s=3)
            [retry] = list(r.messages())
            assert retry.store_timestamp >= sent + 1000
            assert retry.properties["ORIGIN_MESSAGE_ID"] == "ORIG"
            assert retry.reconsume_times == 1 and "DELAY" not in retry.properties
            # second failure: from the retry topic, origin and first topic are kept
            r2 = await broker.send_back("g", retry.commit_log_offset, origin_msg_id="OTHER")
            again = broker.message_by_offset(r2.commit_log_offset)
            assert again.properties["DELAY"] == "3"  # 3 + 1 clamped to the last level
            assert again.properties["ORIGIN_MESSAGE_ID"] == "ORIG"
            assert again.properties["RETRY_TOPIC"] == "T" and again.reconsume_times == 2
    run(main())


def test_dead_letter_after_max_reconsume_times(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            broker.update_group(SubscriptionGroupConfig("g", retry_max_times=2))
            msg = await broker.put_message(Message("T", b"x", queue_id=0, reconsume_times=1))
            r = await broker.send_back("g", msg.commit_log_offset)
            assert broker.message_by_offset(r.commit_log_offset).topic == SCHEDULE_TOPIC
            msg = await broker.put_message(Message("T", b"y", {"DELAY": "0"}, queue_id=0, reconsume_times=2))
            r = await broker.send_back("g", msg.commit_log_offset)
            dead = broker.message_by_offset(r.commit_log_offset)
            assert dead.topic == "%DLQ%g" and dead.reconsume_times == 3
            assert "DELAY" not in dead.properties and dead.properties["RETRY_TOPIC"] == "T"
            assert broker.get_topic("%DLQ%g").perm == PERM_WRITE
            # the header's maxReconsumeTimes overrides the group; a negative level is dead at once
            msg = await broker.put_message(Message("T", b"z", queue_id=0, reconsume_times=5))
            r = await broker.send_back("g", msg.commit_log_offset, max_reconsume_times=10)
            assert broker.message_by_offset(r.commit_log_offset).topic == SCHEDULE_TOPIC
            r = await broker.send_back("g", msg.commit_log_offset, delay_level=-1)
            assert broker.message_by_offset(r.commit_log_offset).topic == "%DLQ%g"
    run(main())


def test_default_max_is_sixteen(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            for times, topic in ((15, SCHEDULE_TOPIC), (16, "%DLQ%g")):
                msg = await broker.put_message(Message("T", b"x", queue_id=0, reconsume_times=times))
                r = await broker.send_back("g", msg.commit_log_offset)
                assert broker.message_by_offset(r.commit_log_offset).topic == topic
    run(main())


def test_unknown_offset_is_a_typed_error(sem_config):
    async def main():
        async with Broker(sem_config) as broker:
            with pytest.raises(MessageNotFound):
                await broker.send_back("g", 10_000_000)
    run(main())
