import asyncio
import os
import signal
import subprocess
import sys
import time

from rocketport.common.message import Message
from rocketport.core.store.message_store import MessageStore


def _rocketport(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rocketport", *args], capture_output=True,
                          text=True, timeout=120, **kw)


def _write_store(config, n=40):
    async def main():
        store = MessageStore(config)
        store.open()
        await store.start()
        for i in range(n):
            await store.put_message(Message("Dump", f"body-{i}".encode(), {"TAGS": "t", "KEYS": f"k{i}"},
                                            queue_id=i % 2))
        await store.put_inner_batch("Dump", 0, bytes(8) + b"batch", 3)
        await store.stop()
    asyncio.run(main())


def test_broker_starts_and_stops_cleanly_on_sigterm(tmp_path):
    root = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "rocketport", "broker", "-c", "conf/broker.yaml",
                             "--set", f"storePathRootDir={root}",
                             # ephemeral ports: a broker already running on the defaults must not fail this
                             "--set", "listenPort=0", "--set", "namesrv.port=0", "--set", "kafka.port=0", "--set", "amqp.port=0",
                             "--set", "stomp.port=0", "--set", "stomp.wsPort=0", "--set", "http.port=0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        seen = ""
        while "ready" not in seen and time.monotonic() < deadline:
            seen += proc.stderr.readline()
        assert "ready" in seen and str(root) in seen
        assert (root / "abort").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (root / "abort").exists()
    assert (root / "checkpoint").exists()


def test_broker_rejects_bad_config(tmp_path):
    r = _rocketport("broker", "-c", "conf/broker.yaml", "--set", "flushDiskTyp=SYNC")
    assert r.returncode == 2 and "unknown key 'flushDiskTyp'" in r.stderr


def test_store_verify_and_dump(small_config):
    _write_store(small_config)
    root = small_config.store_path_root_dir
    r = _rocketport("store", "verify", root)
    assert r.returncode == 0, r.stdout
    assert "records: 41" in r.stdout and "messages: 43" in r.stdout and "consistent" in r.stdout
    r = _rocketport("store", "dump", root, "--topic", "Dump", "--queue", "1", "--limit", "3")
    assert r.returncode == 0
    assert "body-1" in r.stdout and "body-5" in r.stdout and "body-7" not in r.stdout


def test_store_verify_reports_corruption(small_config):
    _write_store(small_config)
    root = small_config.store_path_root_dir
    seg = os.path.join(root, "commitlog", "00000000000000000000")
    with open(seg, "r+b") as f:
        f.seek(90)  # inside the first record's body (the header is 88 bytes)
        f.write(b"\xee\xee")
    r = _rocketport("store", "verify", root)
    assert r.returncode == 1
    assert "CRC mismatch" in r.stdout
