"""Dramatiq, unchanged, over Rocketport's AMQP front-end: its RabbitmqBroker (pika) and a
real Dramatiq worker (``dramatiq.Worker``, its consumer and worker threads, in this
process so the results' stub backend is shared) run actors: enqueue and results, retries
with backoff (Dramatiq re-enqueues a failed message into the queue's delay queue ``.DQ``,
which the worker consumes and holds until the message's eta), a delayed send, and a
message that fails for good (after its retry) dead-lettered by the worker's nack (requeue
false) into ``.XQ`` (the queue's ``x-dead-letter-routing-key``; ``.XQ`` has
``x-message-ttl``). A worker process (the ``dramatiq`` command) SIGKILLed mid-task: the
unacknowledged message runs again on the next worker. Each test runs on RabbitMQ too: what
the test expects is what RabbitMQ does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dramatiq
import pika
import pytest
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.results import Results
from dramatiq.results.backends import StubBackend

from tests.support.processes import REPO

WAIT_MS = 15_000


@pytest.fixture(params=[pytest.param("rabbitmq", marks=pytest.mark.rabbitmq), "rocketport"])
def url(request, amqp_url) -> str:
    return amqp_url if request.param == "rocketport" else request.getfixturevalue("rabbitmq").url + "%2F"


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def broker(url, backend) -> Iterator[RabbitmqBroker]:
    broker = RabbitmqBroker(url=url)
    broker.add_middleware(Results(backend=backend))
    try:
        yield broker
    finally:
        broker.close()


def _worker(broker: RabbitmqBroker) -> dramatiq.Worker:
    worker = dramatiq.Worker(broker, worker_threads=2, worker_timeout=100)
    worker.start()
    return worker


def _queue() -> str:
    return f"dramatiq-{uuid.uuid4().hex[:8]}"


def test_actors_run_and_return_results(broker, backend):
    queue = _queue()

    @dramatiq.actor(broker=broker, queue_name=queue, store_results=True)
    def add(x: int, y: int) -> dict:
        return {"sum": x + y, "pair": [x, y]}

    messages = [add.send(i, i * 10) for i in range(5)]
    worker = _worker(broker)
    try:
        got = [m.get_result(backend=backend, block=True, timeout=WAIT_MS) for m in messages]
    finally:
        worker.stop()
    assert got == [{"sum": i * 11, "pair": [i, i * 10]} for i in range(5)]


def test_a_failing_actor_is_retried_through_the_delay_queue(broker, backend):
    queue = _queue()
    attempts: list[int] = []

    @dramatiq.actor(broker=broker, queue_name=queue, store_results=True, max_retries=3,
                    min_backoff=100, max_backoff=300)
    def flaky(n: int) -> int:
        attempts.append(n)
        if len(attempts) < 3:
            raise RuntimeError("not yet")
        return n * 2

    message = flaky.send(21)
    worker = _worker(broker)
    try:
        assert message.get_result(backend=backend, block=True, timeout=WAIT_MS) == 42
    finally:
        worker.stop()
    assert attempts == [21, 21, 21]


def test_a_delayed_message_runs_after_its_delay(broker):
    queue = _queue()
    ran = threading.Event()

    @dramatiq.actor(broker=broker, queue_name=queue)
    def later() -> None:
        ran.set()

    sent_at = time.time()
    message = later.send_with_options(delay=500)
    assert message.queue_name == f"{queue}.DQ" and message.options["eta"] >= int(sent_at * 1000) + 500
    worker = _worker(broker)
    try:
        assert ran.wait(WAIT_MS / 1000)
    finally:
        worker.stop()


def test_a_message_that_fails_for_good_is_dead_lettered_to_the_xq(broker, url):
    queue = _queue()

    @dramatiq.actor(broker=broker, queue_name=queue, max_retries=1, min_backoff=100, max_backoff=200)
    def broken(n: int) -> None:
        raise ValueError(f"broken {n}")

    message = broken.send(7)
    worker = _worker(broker)
    try:
        body = _get(url, f"{queue}.XQ")
    finally:
        worker.stop()
    dead = dramatiq.Message.decode(body)
    assert (dead.message_id, dead.args) == (message.message_id, (7,))
    # the retry's copy (through the delay queue), the traceback of its first failure in it
    assert dead.options["retries"] == 1 and "broken 7" in dead.options["traceback"]


def _get(url: str, queue: str) -> bytes:
    """The first message of ``queue`` (basic.get, polled up to WAIT_MS)."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        channel = conn.channel()
        deadline = time.monotonic() + WAIT_MS / 1000
        while time.monotonic() < deadline:
            method, _, body = channel.basic_get(queue, auto_ack=True)
            if method is not None:
                return body
            time.sleep(0.1)
    raise AssertionError(f"nothing dead-lettered into {queue}")


def test_a_task_of_a_killed_worker_process_runs_again(url, tmp_path):
    """Dramatiq acknowledges a message after its actor returns: a ``dramatiq`` worker process
    SIGKILLed mid-task leaves it unacknowledged, and the broker gives it to the next worker."""
    queue = _queue()
    env = dict(os.environ, DRAMATIQ_TEST_URL=url, DRAMATIQ_TEST_QUEUE=queue, DRAMATIQ_TEST_MARKS=str(tmp_path))
    sender = RabbitmqBroker(url=url)
    try:
        dramatiq.actor(lambda n: None, actor_name="slow", broker=sender, queue_name=queue).send(1)
    finally:
        sender.close()
    first = _dramatiq_worker(env, tmp_path / "first.log")
    try:
        _wait_for(tmp_path / "started-1-0", first, tmp_path / "first.log")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    assert not (tmp_path / "done-1").exists()
    second = _dramatiq_worker(env, tmp_path / "second.log")
    try:
        _wait_for(tmp_path / "started-1-1", second, tmp_path / "second.log")
        (tmp_path / "release-1").touch()
        _wait_for(tmp_path / "done-1", second, tmp_path / "second.log")
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(30)
    assert sorted(p.name for p in tmp_path.glob("started-1-*")) == ["started-1-0", "started-1-1"]


def _dramatiq_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "dramatiq", "tests.apps.dramatiq_actors",
                                 "--processes", "1", "--threads", "1"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)


def _wait_for(path: Path, worker: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {path.name} from the worker; its log:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
