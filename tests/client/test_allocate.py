"""Queue allocation: RocketMQ's documented splits, and partition properties for any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.client.rebalance import allocate_averagely, allocate_averagely_by_circle
from rocketport.protocols.remoting.bodies import MessageQueue

STRATEGIES = [allocate_averagely, allocate_averagely_by_circle]


def cids(n: int) -> list[str]:
    return [f"CID_PREFIX{i}" for i in range(n)]


def split(strategy, queues: int, clients: int) -> list[list[int]]:
    ids = cids(clients)
    return [strategy(list(range(queues)), ids, cid) for cid in ids]


# RocketMQ's own tests: 10 queues over 4 consumers.
def test_averagely_ten_queues_four_consumers_as_rocketmq():
    assert split(allocate_averagely, 10, 4) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_by_circle_ten_queues_four_consumers_as_rocketmq():
    assert split(allocate_averagely_by_circle, 10, 4) == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]


@pytest.mark.parametrize(
    ("queues", "clients", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (4, 4, [[0], [1], [2], [3]]),
        (3, 5, [[0], [1], [2], [], []]),
        (1, 2, [[0], []]),
        (5, 1, [[0, 1, 2, 3, 4]]),
    ],
)
def test_averagely_small_cases(queues, clients, expected):
    assert split(allocate_averagely, queues, clients) == expected


@pytest.mark.parametrize(
    ("queues", "clients", "expected"),
    [
        (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
        (3, 5, [[0], [1], [2], [], []]),
        (5, 1, [[0, 1, 2, 3, 4]]),
    ],
)
def test_by_circle_small_cases(queues, clients, expected):
    assert split(allocate_averagely_by_circle, queues, clients) == expected


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unknown_client_gets_nothing(strategy):
    assert strategy([0, 1, 2], cids(2), "CID_PREFIX") == []


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("mqs", "ids", "cid"), [([0], ["a"], ""), ([], ["a"], "a"), ([0], [], "a")])
def test_empty_inputs_allocate_nothing(strategy, mqs, ids, cid):
    """A rebalance that sees no queues or no clients yet takes nothing (RocketMQ's
    RebalanceImpl logs the strategy's refusal and takes nothing either)."""
    assert strategy(mqs, ids, cid) == []


def test_works_on_sorted_message_queue_keys():
    mqs = sorted((MessageQueue("T", b, q) for b in ("b2", "b1") for q in (1, 0)),
                 key=lambda mq: (mq.topic, mq.broker_name, mq.queue_id))
    assert [(mq.broker_name, mq.queue_id) for mq in mqs] == [
        ("b1", 0), ("b1", 1), ("b2", 0), ("b2", 1)
    ]
    assert allocate_averagely(mqs, ["c0", "c1"], "c1") == mqs[2:]
    assert allocate_averagely_by_circle(mqs, ["c0", "c1"], "c1") == [mqs[1], mqs[3]]


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=300, deadline=None)
@given(queues=st.integers(1, 64), clients=st.integers(1, 24))
def test_every_queue_goes_to_exactly_one_client_and_sizes_differ_by_at_most_one(
    strategy, queues, clients
):
    shares = split(strategy, queues, clients)
    assigned = sorted(q for share in shares for q in share)
    assert assigned == list(range(queues))
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1
    assert all(share == sorted(share) for share in shares)  # each share keeps input order
    assert split(strategy, queues, clients) == shares  # deterministic


@settings(max_examples=200, deadline=None)
@given(queues=st.integers(1, 64), clients=st.integers(1, 24))
def test_averagely_gives_contiguous_blocks_larger_first(queues, clients):
    shares = split(allocate_averagely, queues, clients)
    flat = [q for share in shares for q in share]
    assert flat == list(range(queues))  # blocks in client order, no gaps
    sizes = [len(share) for share in shares]
    assert sizes == sorted(sizes, reverse=True)


@settings(max_examples=200, deadline=None)
@given(queues=st.integers(1, 64), clients=st.integers(1, 24))
def test_by_circle_deals_queue_i_to_client_i_mod_n(queues, clients):
    for index, share in enumerate(split(allocate_averagely_by_circle, queues, clients)):
        assert all(q % clients == index for q in share)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=10, unique=True),
       st.lists(st.integers(), min_size=1, max_size=40, unique=True))
def test_arbitrary_ids_and_queue_values_partition(ids, mqs):
    for strategy in STRATEGIES:
        assigned = [mq for cid in ids for mq in strategy(mqs, ids, cid)]
        assert sorted(assigned) == sorted(mqs)
