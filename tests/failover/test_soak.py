"""Two cycles of the randomised failover soak (tests/failover/soak.py; ``bench/failover_soak.py
--cycles 20`` for the long run): whatever faults the seed picks, no acknowledged send is
lost, none is read twice, nothing is read that was not sent, and a frozen master answers
no write after its successor was elected."""

from __future__ import annotations

import random

from tests.failover.cluster import TTL_S
from tests.failover.soak import run_soak


def test_two_random_faults_lose_and_duplicate_nothing(tmp_path):
    seed = random.randrange(1 << 30)
    result = run_soak(tmp_path, cycles=2, ttl_s=TTL_S, seed=seed)
    outcome = {"seed": seed, "faults": result.faults, "acked": result.acked}
    assert len(result.faults) == 2, outcome
    assert result.acked > 100, outcome  # the sends of both cycles, not only the first
    assert (result.acked_lost, result.duplicates, result.made_up, result.split_brain_writes) == (0, 0, 0, 0), outcome
