"""TrafficStats: RocketMQ's minute / hour / day windows from running totals."""

from rocketport.core.metadata.offsets import ConsumerOffsetManager
from rocketport.core.metadata.traffic_stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS, TrafficStats

PUT = (TOPIC_PUT_NUMS, "T")
GOT = (GROUP_GET_NUMS, "T@g")


def test_windows_count_what_came_in_each_span_and_the_rate_over_it():
    stats = TrafficStats()
    stats.sample(0.0, {PUT: 100})  # the baseline: what the log held at start-up
    total = 100
    for t in range(10, 3601 * 2, 10):  # two hours, 1 message a second
        total += 10
        stats.sample(float(t), {PUT: total})
    data = stats.stats(*PUT, total, 7200.0)
    assert (data.minute.sum, data.minute.tps) == (60, 1.0)
    assert data.hour.sum == 3600 and data.hour.tps == 1.0
    assert data.day.sum == 7200  # from the baseline: the day window is not full yet
    assert data.day.tps == 1.0


def test_what_came_since_the_last_sample_counts_at_once():
    stats = TrafficStats()
    stats.sample(0.0, {PUT: 0})
    assert stats.stats(*PUT, 0, 5.0).minute.sum == 0
    data = stats.stats(*PUT, 4, 4.0)
    assert (data.minute.sum, data.minute.tps, data.day.sum) == (4, 1.0, 4)


def test_keys_at_start_up_are_the_baseline_and_keys_made_later_count_from_zero():
    stats = TrafficStats()
    stats.sample(0.0, {PUT: 1000})
    stats.sample(10.0, {PUT: 1000, GOT: 30})
    assert stats.stats(*PUT, 1000, 10.0).minute.sum == 0
    assert stats.stats(*GOT, 30, 10.0).minute.sum == 30


def test_a_groups_consumption_is_how_far_its_commits_moved_forward_after_each_queues_first(tmp_path):
    offsets = ConsumerOffsetManager(str(tmp_path))
    offsets.commit("g", "T", 0, 500)  # a new group starting at the queue's end read nothing
    offsets.commit("g", "T", 1, 0)
    offsets.commit("g", "T", 0, 520)
    offsets.commit("g", "T", 1, 7)
    offsets.commit("g", "T", 1, 2)  # a reset back is no consumption
    offsets.commit("g", "T", 1, 4)
    assert offsets.consumed == {"T@g": 29}
    offsets.remove_group("g")
    assert offsets.consumed == {}


def test_a_total_that_goes_down_starts_again_and_a_key_made_again_counts_from_zero():
    stats = TrafficStats()
    stats.sample(0.0, {PUT: 0})
    stats.sample(10.0, {PUT: 50})
    stats.sample(20.0, {PUT: 5})  # the topic deleted and made again between two samples
    assert stats.stats(*PUT, 5, 20.0).minute.sum == 0
    stats.sample(30.0, {PUT: 15})
    assert stats.stats(*PUT, 15, 30.0).minute.sum == 10
    stats.sample(40.0, {})  # deleted: its samples go
    stats.sample(50.0, {PUT: 3})
    assert stats.stats(*PUT, 3, 50.0).minute.sum == 3
