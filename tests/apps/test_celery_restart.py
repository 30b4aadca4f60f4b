"""Celery over a Rocketport broker that is SIGKILLed and started again: the worker
reconnects by itself (Celery's broker_connection_retry) and goes on taking tasks, and a task
waiting in Celery's durable queue (persistent messages) when the broker dies is run after
the restart, as on RabbitMQ (the client sends with publisher confirms, Celery's
``confirm_publish``: without them a send the broker had not read when it died is lost on
either broker). A broker process of its own on a fixed free port, so the
clients find it again. After a crash, a task already run may run again (at least once, on
RabbitMQ too: an acknowledgement is not synced to disk before its answer), so each task
notes its runs in a directory of its own and the test asks only that each ran, where."""

from __future__ import annotations

import time
from pathlib import Path

from tests.apps.celery_tasks import make_app
from tests.apps.celery_worker import CeleryWorker
from tests.support.processes import RestartableBroker
from tests.support.remoting import free_port

WAIT_S = 60.0  # Celery retries its connection after 2, 4, 6 ... s


def _marker(root: Path, name: str) -> Path:
    marker = root / name
    marker.mkdir()
    (marker / "release").touch()  # apps.held notes its run and returns
    return marker


def _workers_that_ran(marker: Path, worker: CeleryWorker) -> set[str]:
    """The workers that ran ``apps.held`` into ``marker``, once one has (bounded)."""
    path = marker / "runs"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not worker.broken():
        if path.exists() and path.read_text():
            return set(path.read_text().split()[::2])
        time.sleep(0.05)
    raise AssertionError(f"{marker.name} did not run; worker log:\n{worker.log_tail()}")


def test_celery_goes_on_after_the_broker_is_killed_and_restarted(tmp_path):
    port = free_port()
    # 16 MiB segments: a restart after a crash zero-checks the whole last segment (about 15 s
    # for the default 1 GiB under load: MappedFile.zero_from reads every page)
    broker = RestartableBroker(tmp_path / "store", "listenPort=0", "namesrv.port=0", "kafka.enabled=false",
                               "stomp.enabled=false", f"amqp.port={port}", "mappedFileSizeCommitLog=16777216")
    url = f"amqp://guest:guest@127.0.0.1:{port}//"
    broker.start()
    app = make_app(url, queue="restart")
    app.conf.broker_transport_options = {"confirm_publish": True}  # a send returns once stored
    held = app.tasks["apps.held"]
    first = CeleryWorker(tmp_path / "first", url, name="first", queue="restart")
    second = None
    try:
        first.wait_ready()
        before = _marker(tmp_path, "before")
        held.delay(str(before))
        assert _workers_that_ran(before, first) == {first.hostname}

        broker.kill()
        broker.start()
        reconnected = _marker(tmp_path, "reconnected")
        held.delay(str(reconnected))  # the client's publish reconnects too
        assert _workers_that_ran(reconnected, first) == {first.hostname}

        first.stop()
        waiting = _marker(tmp_path, "waiting")
        held.delay(str(waiting))  # into the durable queue, no worker on it
        broker.kill()
        broker.start()
        second = CeleryWorker(tmp_path / "second", url, name="second", queue="restart")
        second.wait_ready()
        assert _workers_that_ran(waiting, second) == {second.hostname}
    finally:
        app.close()
        first.stop()
        if second is not None:
            second.stop()
        broker.stop()
