"""A Celery worker as a subprocess of the test, as users run one (``celery -A ... worker``):
started on a queue of the Rocketport broker, ready when its log says so, stopped by SIGTERM
(warm shutdown) or SIGKILLed by PID. Its log and any file it writes stay in a tmp dir."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.processes import REPO

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class CeleryWorker:
    """One ``celery worker`` process (its pool's children in the session it leads)."""

    def __init__(self, workdir: Path, broker_url: str, *, name: str, pool: str = "solo",
                 concurrency: int = 1, queue: str = "celery", backend: str = "rpc://",
                 loglevel: str = "INFO") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"{name}.log"
        self.hostname = f"{name}@{socket.gethostname()}"
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", ROCKETPORT_CELERY_BROKER=broker_url,
                   ROCKETPORT_CELERY_BACKEND=backend, ROCKETPORT_CELERY_QUEUE=queue)
        command = [sys.executable, "-m", "celery", "-A", "tests.apps.celery_tasks:app",
                   "worker", "--pool", pool, "--concurrency", str(concurrency), "--queues", queue,
                   "--hostname", self.hostname, "--loglevel", loglevel]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until the worker logs `ready.` (an assertion error with its log otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if " ready." in self.log.read_text():
                return
            time.sleep(0.05)
        raise AssertionError(f"the Celery worker did not start:\n{self.log_tail()}")

    def wait_log(self, text: str, timeout: float = READY_TIMEOUT_S) -> None:
        """Until ``text`` is in the worker's log (an assertion error with its log otherwise)."""
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert text in self.log.read_text(), self.log_tail()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text()[-chars:]

    def broken(self) -> bool:
        """Exited, or hit an error Celery does not recover from (it then hangs in its
        shutdown with a prefork pool, waiting for its task handler)."""
        return self.proc.poll() is not None or "Unrecoverable error" in self.log.read_text()

    def kill(self) -> None:
        """SIGKILL, as a crash: its unacknowledged deliveries go back to the broker."""
        self.proc.kill()
        self.proc.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM (Celery's warm shutdown); if it overruns or is broken, SIGKILL of the
        process group it leads (itself and its pool's children, nothing else)."""
        if not self.broken():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
                return
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(STOP_TIMEOUT_S)
