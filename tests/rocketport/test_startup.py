"""Start-up as a user meets it: one broker per store, and failures in one line that leave
the store as it was. Real broker processes throughout."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.support.processes import REPO, run_broker, start_broker, stop, wait_ready

_EPHEMERAL = ["listenPort=0", "namesrv.port=0", "kafka.port=0", "http.port=0"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocketport", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_a_second_broker_on_the_same_store_refuses_to_start(tmp_path):
    root = tmp_path / "store"
    first = start_broker(root, *_EPHEMERAL)
    try:
        wait_ready(first)
        second = run_broker(root, *_EPHEMERAL)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert lines[-1] == (f"rocketport: store {root} is in use by process {first.pid} "
                             "(one broker per store)"), second.stderr
        assert "Traceback" not in second.stderr
        # the second start touched nothing: the first one's abort marker is still there
        assert (root / "abort").exists()
        verify = _run("store", "verify", str(root))
        assert f"a live broker (pid {first.pid}) holds this store" in verify.stdout
        assert first.poll() is None
    finally:
        stop(first)
    assert first.returncode == 0
    assert not (root / "abort").exists()
    verify = _run("store", "verify", str(root))
    assert "live broker" not in verify.stdout and verify.returncode == 0


def test_a_sigkilled_broker_leaves_no_stale_lock(tmp_path):
    root = tmp_path / "store"
    first = start_broker(root, *_EPHEMERAL)
    try:
        wait_ready(first)
    finally:
        first.kill()
        first.wait()
    second = start_broker(root, *_EPHEMERAL)
    try:
        seen = wait_ready(second)
        assert "after a crash" in seen
    finally:
        stop(second)
    assert second.returncode == 0


def test_a_taken_port_fails_in_one_line_before_the_store_is_touched(tmp_path):
    root = tmp_path / "store"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_broker(root, "listenPort=0", "namesrv.port=0", f"kafka.port={port}")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"rocketport: cannot listen on 127.0.0.1:{port} (kafka): address already in use"), r.stderr
    assert "Traceback" not in r.stderr
    assert not (root / "abort").exists() and not (root / "checkpoint").exists()
    # and the next start is a clean one, not a crash recovery
    proc = start_broker(root, *_EPHEMERAL)
    try:
        assert "after a clean shutdown" in wait_ready(proc)
    finally:
        stop(proc)


def test_a_store_path_that_is_a_file_fails_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = run_broker(blocker / "store", *_EPHEMERAL)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"rocketport: cannot use {blocker / 'store'}: not a directory"), r.stderr


def test_version():
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.startswith("rocketport 0.")


def test_json_log_format_gives_one_object_a_line(tmp_path):
    import orjson
    command = [sys.executable, "-m", "rocketport", "--log-format", "json", "broker", "-c", "conf/broker.yaml",
               "--set", f"storePathRootDir={tmp_path / 'store'}", "--set", "amqp.port=0", "--set", "stomp.port=0",
               "--set", "stomp.wsPort=0", *[a for s in _EPHEMERAL for a in ("--set", s)]]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        seen = wait_ready(proc)
    finally:
        stop(proc)
    lines = [orjson.loads(line) for line in seen.splitlines() if line.strip()]
    assert all(set(line) == {"time", "level", "logger", "message"} for line in lines), lines
    assert any(line["message"].startswith("broker broker-a ready") and line["logger"] == "rocketport.server"
               for line in lines)
    assert all(line["time"].endswith("+00:00") for line in lines)
