"""Real broker processes for the tests that need one (start-up, crash, disk use): started
with `python -m rocketport broker`, ready when its log says so, stopped by SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def broker_command(root: Path, *settings: str) -> list[str]:
    """``rocketport broker -c conf/broker.yaml`` on store ``root`` with ``--set`` settings
    (the AMQP and STOMP ports are free ones unless a setting names them: never the defaults)."""
    args = [arg for setting in settings for arg in ("--set", setting)]
    return [sys.executable, "-m", "rocketport", "broker", "-c", "conf/broker.yaml",
            "--set", f"storePathRootDir={root}", "--set", "amqp.port=0",
            "--set", "stomp.port=0", "--set", "stomp.wsPort=0", *args]


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
