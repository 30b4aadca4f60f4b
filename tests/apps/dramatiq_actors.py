"""Actors for the Dramatiq worker subprocess (``python -m dramatiq tests.apps.dramatiq_actors``):
the broker's URL and a directory for marker files come from the environment, set by
tests/apps/test_dramatiq.py. ``slow`` writes ``started-N-ATTEMPT``, waits (up to 30 s) for
the test to write ``release-N``, then writes ``done-N``: what a worker killed mid-task
leaves, and what the next worker does."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

QUEUE = os.environ.get("DRAMATIQ_TEST_QUEUE", "dramatiq-slow")
MARKS = Path(os.environ.get("DRAMATIQ_TEST_MARKS", "."))

dramatiq.set_broker(RabbitmqBroker(url=os.environ.get("DRAMATIQ_TEST_URL", "amqp://127.0.0.1:5672/")))


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def slow(n: int) -> None:
    attempt = len(list(MARKS.glob(f"started-{n}-*")))
    (MARKS / f"started-{n}-{attempt}").touch()
    deadline = time.monotonic() + 30
    while not (MARKS / f"release-{n}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (MARKS / f"done-{n}").touch()
