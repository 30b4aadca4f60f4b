"""RebalanceLockManager: ownership, renewal, expiry and contention between clients."""

from __future__ import annotations

import pytest

from rocketport.core.consumer.locks import MessageQueueKey, RebalanceLockManager

G = "orderly-group"
MQS = [MessageQueueKey("T", "broker-a", q) for q in range(4)]


def test_free_queues_are_granted_and_reported(clock):
    locks = RebalanceLockManager(clock=clock)
    assert locks.try_lock_batch(G, MQS, "c1") == set(MQS)
    assert all(locks.is_locked(G, mq, "c1") for mq in MQS)
    assert not locks.is_locked(G, MQS[0], "c2")
    assert not locks.is_locked("other-group", MQS[0], "c1")


def test_two_clients_contend_and_each_gets_only_free_queues(clock):
    locks = RebalanceLockManager(clock=clock)
    assert locks.try_lock_batch(G, MQS[:2], "c1") == set(MQS[:2])
    assert locks.try_lock_batch(G, MQS, "c2") == set(MQS[2:])
    assert locks.try_lock_batch(G, MQS, "c1") == set(MQS[:2])
    assert locks.is_locked(G, MQS[3], "c2") and not locks.is_locked(G, MQS[3], "c1")


def test_groups_lock_independently(clock):
    locks = RebalanceLockManager(clock=clock)
    assert locks.try_lock_batch("g1", MQS, "c1") == set(MQS)
    assert locks.try_lock_batch("g2", MQS, "c2") == set(MQS)


def test_lock_expires_after_max_live_time_and_is_taken_over(clock):
    locks = RebalanceLockManager(max_live_time_ms=60_000, clock=clock)
    locks.try_lock_batch(G, MQS[:1], "c1")
    clock.advance(60_000)  # exactly max live: still held (RocketMQ compares strictly)
    assert locks.is_locked(G, MQS[0], "c1")
    assert locks.try_lock_batch(G, MQS[:1], "c2") == set()
    clock.advance(1)
    assert not locks.is_locked(G, MQS[0], "c1")
    assert locks.try_lock_batch(G, MQS[:1], "c2") == {MQS[0]}
    assert locks.is_locked(G, MQS[0], "c2") and not locks.is_locked(G, MQS[0], "c1")


def test_relocking_renews_the_lease(clock):
    locks = RebalanceLockManager(max_live_time_ms=60_000, clock=clock)
    locks.try_lock_batch(G, MQS[:1], "c1")
    for _ in range(5):
        clock.advance(50_000)
        assert locks.try_lock_batch(G, MQS[:1], "c1") == {MQS[0]}
    clock.advance(50_000)
    assert locks.try_lock_batch(G, MQS[:1], "c2") == set()


def test_is_locked_does_not_renew(clock):
    locks = RebalanceLockManager(max_live_time_ms=1_000, clock=clock)
    locks.try_lock_batch(G, MQS[:1], "c1")
    clock.advance(900)
    assert locks.is_locked(G, MQS[0], "c1")
    clock.advance(200)
    assert not locks.is_locked(G, MQS[0], "c1")


def test_unlock_releases_only_own_locks(clock):
    locks = RebalanceLockManager(clock=clock)
    locks.try_lock_batch(G, MQS[:2], "c1")
    locks.try_lock_batch(G, MQS[2:], "c2")
    locks.unlock_batch(G, MQS, "c1")
    assert not any(locks.is_locked(G, mq, "c1") for mq in MQS)
    assert all(locks.is_locked(G, mq, "c2") for mq in MQS[2:])
    assert locks.try_lock_batch(G, MQS, "c3") == set(MQS[:2])
    locks.unlock_batch("no-such-group", MQS, "c1")  # tolerated, as RocketMQ


def test_unlocking_everything_leaves_an_empty_table(clock):
    locks = RebalanceLockManager(clock=clock)
    locks.try_lock_batch(G, MQS, "c1")
    locks.unlock_batch(G, MQS, "c1")
    assert len(locks) == 0


def test_purge_expired_bounds_the_table(clock):
    locks = RebalanceLockManager(max_live_time_ms=1_000, clock=clock)
    locks.try_lock_batch("g1", MQS, "dead-client")
    clock.advance(500)
    locks.try_lock_batch("g2", MQS[:1], "live-client")
    clock.advance(600)
    assert locks.purge_expired() == len(MQS)
    assert len(locks) == 1
    assert locks.is_locked("g2", MQS[0], "live-client")
    clock.advance(1_000)
    assert locks.purge_expired() == 1 and len(locks) == 0


def test_message_queue_key_is_a_value():
    assert MessageQueueKey("T", "b", 1) == MessageQueueKey("T", "b", 1)
    assert len({MessageQueueKey("T", "b", 1), MessageQueueKey("T", "b", 1)}) == 1
    assert MessageQueueKey("T", "b", 1) != MessageQueueKey("T", "c", 1)
    with pytest.raises(AttributeError):
        MessageQueueKey("T", "b", 1).queue_id = 2  # type: ignore[misc]


def test_max_live_time_must_be_positive():
    with pytest.raises(ValueError, match="rebalanceLockMaxLiveTime"):
        RebalanceLockManager(max_live_time_ms=0)
