"""A broker that says "ready" is listening: two real broker processes (different stores)
race for one port, the first stopped between binding it and listening on it (the gap in
which, both with SO_REUSEADDR, the second can bind and listen too)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from rocketport.protocols.listener import STOP_AFTER_BIND_ENV
from tests.support.processes import REPO, broker_command, start_broker, stop, wait_ready


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_stopped(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the process has stopped itself (state T), bounded."""
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.05)
    raise AssertionError(f"broker {proc.pid} never stopped after binding")


def test_a_broker_whose_port_was_taken_before_it_listened_fails_instead_of_ready(tmp_path):
    port = _free_port()
    settings = (f"listenPort={port}", "namesrv.port=0", "kafka.enabled=false")
    first = subprocess.Popen(broker_command(tmp_path / "a", *settings), cwd=REPO, text=True,
                             stderr=subprocess.PIPE, env={**os.environ, STOP_AFTER_BIND_ENV: str(port)})
    second = None
    try:
        _wait_stopped(first)  # bound, not listening yet
        second = start_broker(tmp_path / "b", *settings)
        wait_ready(second)
        first.send_signal(signal.SIGCONT)
        _, err = first.communicate(timeout=60)
        assert first.returncode == 1, err
        assert err.strip().splitlines()[-1] == (
            f"rocketport: cannot listen on 127.0.0.1:{port} (broker (remoting)): "
            "address already in use"), err
        assert " ready (pid" not in err and "Traceback" not in err
        assert not (tmp_path / "a" / "abort").exists()  # its store untouched
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            assert conn.getpeername()[1] == port  # the second broker's port, still served
        assert second.poll() is None
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGCONT)
            stop(first)
        if second is not None:
            stop(second)
