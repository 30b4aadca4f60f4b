"""The Celery application the tests run over Rocketport's AMQP front-end: one set of tasks,
registered on an app built from its broker URL, result backend and default queue.

The worker subprocess loads ``app`` (``celery -A tests.apps.celery_tasks:app``), built from
the ``ROCKETPORT_CELERY_*`` variables its test sets; the test process builds its own client
app with ``make_app``. Tasks are named explicitly so both apps agree on the names. Nothing
here touches Rocketport: it is an ordinary Celery application.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded

HOLD_LIMIT_S = 60.0  # how long `held` waits for its release file (bounded)


def make_app(broker_url: str, backend: str = "rpc://", queue: str = "celery") -> Celery:
    """A Celery app on ``broker_url`` with every test task registered."""
    app = Celery("rocketport_apps", broker=broker_url, backend=backend)
    app.conf.update(task_default_queue=queue, broker_connection_retry_on_startup=True,
                    worker_hijack_root_logger=False, result_extended=True)
    _register(app)
    return app


def _register(app: Celery) -> None:
    @app.task(shared=False, name="apps.add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(shared=False, name="apps.tsum")
    def tsum(values: list[int]) -> int:
        return sum(values)

    @app.task(shared=False, name="apps.ran_at")
    def ran_at() -> float:
        """When the worker ran it (wall clock): a countdown or eta holds it until then."""
        return time.time()

    @app.task(shared=False, name="apps.add_late", bind=True, acks_late=True)
    def add_late(self, x: int, y: int) -> dict:
        return {"sum": x + y, "acks_late": self.acks_late}

    @app.task(shared=False, name="apps.flaky", bind=True, max_retries=3)
    def flaky(self, failures: int) -> int:
        """Retries itself (countdown 1 s) until it has been retried ``failures`` times."""
        if self.request.retries < failures:
            raise self.retry(countdown=1)
        return self.request.retries

    @app.task(shared=False, name="apps.sleeper")
    def sleeper(seconds: float) -> str:
        """Sleeps; a soft time limit interrupts it and it says so."""
        try:
            time.sleep(seconds)
        except SoftTimeLimitExceeded:
            return "soft limit"
        return "slept"

    @app.task(shared=False, name="apps.held", bind=True, acks_late=True)
    def held(self, marker_dir: str) -> dict:
        """Notes each run (the worker's name, redelivered), then waits for ``release``
        (bounded)."""
        marker = Path(marker_dir)
        redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
        with open(marker / "runs", "a") as runs:
            runs.write(f"{self.request.hostname} {int(redelivered)}\n")
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not (marker / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"worker": self.request.hostname, "redelivered": redelivered}

app = make_app(os.environ.get("ROCKETPORT_CELERY_BROKER", "memory://"),
               os.environ.get("ROCKETPORT_CELERY_BACKEND", "rpc://"),
               os.environ.get("ROCKETPORT_CELERY_QUEUE", "celery"))
