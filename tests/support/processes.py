"""Real broker processes for the tests that need one (start-up, crash, disk use): started
with `python -m rocketport broker`, ready when its log says so, stopped by SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def broker_command(root: Path, *settings: str, conf: str = "conf/broker.yaml") -> list[str]:
    """``rocketport broker -c conf/broker.yaml`` (or ``conf``) on store ``root`` with ``--set``
    settings (the AMQP, STOMP and HTTP ports are free ones unless a setting names them: never
    the defaults)."""
    args = [arg for setting in settings for arg in ("--set", setting)]
    return [sys.executable, "-m", "rocketport", "broker", "-c", conf,
            "--set", f"storePathRootDir={root}", "--set", "amqp.port=0",
            "--set", "stomp.port=0", "--set", "stomp.wsPort=0", "--set", "http.port=0", *args]


def start_broker(root: Path, *settings: str) -> subprocess.Popen:
    return subprocess.Popen(broker_command(root, *settings), stderr=subprocess.PIPE, text=True,
                            cwd=REPO)


def run_broker(root: Path, *settings: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """A broker run to its end (one that fails to start), its output captured."""
    return subprocess.run(broker_command(root, *settings), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def wait_ready(proc: subprocess.Popen, timeout: float = 60) -> str:
    """The broker's log up to its "ready" line (an assertion error with the log otherwise)."""
    seen = ""
    deadline = time.monotonic() + timeout
    while "ready" not in seen and time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stderr.readline()
    assert "ready" in seen, seen
    return seen


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM and wait (SIGKILL after 30 s): the broker's clean stop."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class RestartableBroker:
    """One store, one broker process at a time, started again on the same ``settings`` (fixed
    ports) after a SIGKILL or a stop; its log appends across starts to ``log``."""

    def __init__(self, root: Path, *settings: str, timeout: float = 60, conf: str = "conf/broker.yaml") -> None:
        self.root, self.settings, self.timeout, self.conf = root, settings, timeout, conf
        self.log = root.parent / "broker.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        """Start it and wait for its "ready" line (an assertion error with the log's end otherwise)."""
        seen = self.log.read_text().count(" ready (pid") if self.log.exists() else 0
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(broker_command(self.root, *self.settings, conf=self.conf),
                                         stdout=subprocess.DEVNULL, stderr=log, cwd=REPO)
        self.starts += 1
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.log.read_text().count(" ready (pid") > seen:
                return
            time.sleep(0.05)
        raise AssertionError(f"the broker did not start:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(self.timeout)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
