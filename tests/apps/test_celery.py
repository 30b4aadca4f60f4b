"""Celery 5, unchanged, over Rocketport's AMQP front-end (issue 33): a worker subprocess and
a client in the test with the ``rpc://`` result backend (results come back over AMQP too).

One prefork worker (2 children: a group runs in parallel, and time limits need prefork:
the solo and threads pools cannot enforce them) serves most tests; the chord, killed-worker
and warm-shutdown cases start workers of their own on queues of their own. Every wait is a
bounded ``result.get(timeout=...)`` or poll. Each case was run against RabbitMQ 3.10 too when
written: all pass there.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from celery import Celery, chord, group
from celery.exceptions import TimeLimitExceeded
from celery.exceptions import TimeoutError as CeleryTimeoutError

from tests.apps.celery_tasks import make_app
from tests.apps.celery_worker import CeleryWorker

RESULT_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def worker(amqp_url, tmp_path_factory) -> Iterator[CeleryWorker]:
    worker = CeleryWorker(tmp_path_factory.mktemp("celery-worker"), amqp_url, name="shared",
                          pool="prefork", concurrency=2)
    try:
        worker.wait_ready()
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def client(amqp_url, worker) -> Iterator[Celery]:
    app = make_app(amqp_url)
    try:
        yield app
    finally:
        app.close()


def _get(result, worker: CeleryWorker):
    """The task's result, waited for in steps (bounded) while the worker lives; a worker
    that died or a timeout fails with the worker's log, which says why."""
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while True:
        try:
            return result.get(timeout=0.5)
        except CeleryTimeoutError:
            if worker.broken() or time.monotonic() >= deadline:
                state = "broke" if worker.broken() else "gave no result"
                raise AssertionError(f"the worker {state}; its log:\n{worker.log_tail()}") from None


def test_the_worker_answers_a_remote_control_ping(client, worker):
    """Celery's remote control (``celery inspect ping``): a broadcast through the fanout
    exchange celery.pidbox, answered on the client's reply queue (auto-delete, x-expires,
    x-message-ttl)."""
    replies = client.control.ping(destination=[worker.hostname], limit=1, timeout=RESULT_TIMEOUT_S)
    assert replies == [{worker.hostname: {"ok": "pong"}}], worker.log_tail()


def test_a_task_sent_through_rocketport_runs_and_its_result_comes_back(client, worker):
    assert _get(client.tasks["apps.add"].delay(2, 3), worker) == 5
    many = [client.tasks["apps.add"].delay(i, 1) for i in range(10)]
    assert [_get(result, worker) for result in many] == [i + 1 for i in range(10)]


def test_countdown_and_eta_hold_a_task_until_it_is_due(client, worker):
    ran_at = client.tasks["apps.ran_at"]
    sent = time.time()
    by_countdown = ran_at.apply_async(countdown=2)
    eta = datetime.now(timezone.utc) + timedelta(seconds=2)
    by_eta = ran_at.apply_async(eta=eta)
    assert _get(by_countdown, worker) >= sent + 2 - 0.1  # Celery's timer, not the broker, waits
    assert _get(by_eta, worker) >= eta.timestamp() - 0.1


def test_an_acks_late_task_runs_and_is_acknowledged_after(client, worker):
    assert _get(client.tasks["apps.add_late"].delay(20, 22), worker) == {"sum": 42,
                                                                         "acks_late": True}


def test_a_task_retries_itself_with_a_countdown_until_it_succeeds(client, worker):
    # each retry is a new message with the retry count and an eta in its headers
    assert _get(client.tasks["apps.flaky"].delay(2), worker) == 2


def test_a_group_gathers_every_result(client, worker):
    result = group(client.tasks["apps.add"].s(i, i) for i in range(10)).apply_async()
    assert _get(result, worker) == [2 * i for i in range(10)]


def test_a_soft_time_limit_interrupts_the_task(client, worker):
    # the limits travel in the message's `timelimit` header, an array [soft, hard]
    result = client.tasks["apps.sleeper"].apply_async((20,), soft_time_limit=1)
    assert _get(result, worker) == "soft limit"


def test_a_hard_time_limit_kills_the_task(client, worker):
    result = client.tasks["apps.sleeper"].apply_async((20,), time_limit=1)
    with pytest.raises(TimeLimitExceeded):
        _get(result, worker)


def test_a_chord_calls_its_body_with_the_results_of_its_header(amqp_url, tmp_path):
    """The rpc:// backend cannot run chords (Celery raises NotImplementedError: a chord needs
    a backend that every worker can read the group's results from). The filesystem backend
    is one Celery supports without another service: its chord waits through the
    `celery.chord_unlock` task, which retries itself with a countdown over the broker until
    the header is done. Its own worker and queue, so the shared worker's rpc:// stays."""
    backend = f"file://{tmp_path / 'results'}"
    (tmp_path / "results").mkdir()
    worker = CeleryWorker(tmp_path / "worker", amqp_url, name="chords", pool="solo",
                          queue="chords", backend=backend)
    app = make_app(amqp_url, backend, queue="chords")
    try:
        worker.wait_ready()
        with pytest.raises(NotImplementedError, match="does not support chords"):
            make_app(amqp_url).backend.ensure_chords_allowed()
        header = [app.tasks["apps.add"].s(i, i) for i in range(5)]
        result = chord(header)(app.tasks["apps.tsum"].s())
        assert _get(result, worker) == sum(2 * i for i in range(5))
    finally:
        app.close()
        worker.stop()


def test_an_acks_late_task_of_a_killed_worker_runs_again_on_a_new_worker(amqp_url, tmp_path):
    """acks_late: the message is acknowledged after the task, so a worker SIGKILLed mid-task
    leaves it unacknowledged; the broker requeues it when the connection drops and the next
    worker runs it, redelivered."""
    marker = tmp_path / "marker"
    marker.mkdir()
    app = make_app(amqp_url, queue="killed")
    first = CeleryWorker(tmp_path / "first", amqp_url, name="first", queue="killed")
    second = None
    try:
        first.wait_ready()
        result = app.tasks["apps.held"].delay(str(marker))
        _poll_runs(marker, 1, first)
        first.kill()
        (marker / "release").touch()
        second = CeleryWorker(tmp_path / "second", amqp_url, name="second", queue="killed")
        second.wait_ready()
        assert _get(result, second) == {"worker": second.hostname, "redelivered": True}
        assert _runs(marker) == [(first.hostname, 0), (second.hostname, 1)]
    finally:
        app.close()
        first.stop()
        if second is not None:
            second.stop()


def test_a_warm_shutdown_finishes_an_acks_late_task_without_handing_it_on(amqp_url, tmp_path):
    """Celery's warm shutdown (SIGTERM) cancels the worker's consumer, lets the running
    task finish, acknowledges it, then closes: on RabbitMQ the delivery stays with the
    leaving worker's channel meanwhile, so a second worker on the queue never runs it."""
    marker = tmp_path / "marker"
    marker.mkdir()
    app = make_app(amqp_url, queue="shutdown")
    leaving = CeleryWorker(tmp_path / "leaving", amqp_url, name="leaving", pool="prefork",
                           queue="shutdown", loglevel="DEBUG")
    staying = None
    try:
        leaving.wait_ready()
        result = app.tasks["apps.held"].delay(str(marker))
        _poll_runs(marker, 1, leaving)
        staying = CeleryWorker(tmp_path / "staying", amqp_url, name="staying", queue="shutdown")
        staying.wait_ready()
        leaving.proc.send_signal(signal.SIGTERM)
        # Celery's steps stop in order: the task consumer is cancelled (cancel-ok awaited)
        # before the connection step stops, and the pool (the running task) after it
        leaving.wait_log("| Consumer: Stopping Connection...")
        (marker / "release").touch()
        assert _get(result, leaving) == {"worker": leaving.hostname, "redelivered": False}
        leaving.proc.wait(RESULT_TIMEOUT_S)
        # the staying worker runs what it was given in order: once this comes back, it has
        # run the held task too if it was given it
        assert _get(app.tasks["apps.add"].delay(1, 1), staying) == 2
        assert _runs(marker) == [(leaving.hostname, 0)]
    finally:
        app.close()
        leaving.stop()
        if staying is not None:
            staying.stop()


def _runs(marker: Path) -> list[tuple[str, int]]:
    """(worker, redelivered) of each run of ``apps.held``, in order."""
    path = marker / "runs"
    lines = path.read_text().split() if path.exists() else []
    return [(worker, int(again)) for worker, again in zip(lines[::2], lines[1::2])]


def _poll_runs(marker: Path, count: int, worker: CeleryWorker) -> None:
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while len(_runs(marker)) < count and time.monotonic() < deadline and not worker.broken():
        time.sleep(0.05)
    assert len(_runs(marker)) >= count, worker.log_tail()
