"""RocketMQ's BrokerStats counters: today since midnight, yesterday, kept across restarts."""

from __future__ import annotations

import datetime

from rocketport.core.metadata.broker_stats import DailyStats


class Clock:
    def __init__(self, day: datetime.datetime) -> None:
        self.now = day.timestamp()

    def __call__(self) -> float:
        return self.now


def test_today_becomes_yesterday_at_midnight_and_a_restart_goes_on_counting(tmp_path):
    clock = Clock(datetime.datetime(2026, 11, 27, 23, 59, 50))
    stats = DailyStats(str(tmp_path), clock)
    stats.load()  # the store's running totals start from 0 with the broker
    clock.now += 5
    stats.sample(50, 10)
    assert (stats.put_today, stats.get_today, stats.put_tps, stats.get_tps) == (50, 10, 10.0, 2.0)
    clock.now += 10  # past midnight
    stats.sample(70, 15)
    assert (stats.put_yesterday, stats.get_yesterday, stats.put_today, stats.get_today) == (50, 10, 20, 5)
    stats.save()
    restarted = DailyStats(str(tmp_path), clock)  # a new process: the store counts from 0 again
    restarted.load()
    clock.now += 1
    restarted.sample(3, 1)
    assert (restarted.put_yesterday, restarted.put_today, restarted.get_today) == (50, 23, 6)


def test_counts_saved_days_ago_are_neither_today_nor_yesterday(tmp_path):
    clock = Clock(datetime.datetime(2026, 11, 20, 12, 0, 0))
    stats = DailyStats(str(tmp_path), clock)
    stats.load()
    clock.now += 1
    stats.sample(9, 0)
    stats.save()
    clock.now += 3 * 86400  # three days later
    again = DailyStats(str(tmp_path), clock)
    again.load()
    assert (again.put_today, again.put_yesterday) == (0, 0)
    clock.now += 1
    again.sample(3, 0)
    clock.now += 86400  # the next day: yesterday is that day's
    again.sample(3, 0)
    assert (again.put_yesterday, again.put_today) == (3, 0)
