"""bench/crash_soak.py, bounded: two SIGKILL cycles of a real broker under acknowledged
Kafka (acks=all) and remoting sends lose nothing acknowledged and serve nothing corrupt;
and the soak does report losses when the store really loses acknowledged writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOAK = os.path.join(ROOT, "bench", "crash_soak.py")


def _soak(tmp_path, *args: str) -> tuple[int, dict[str, dict]]:
    done = subprocess.run([sys.executable, SOAK, "--dir", str(tmp_path), "--max-run", "1.5", *args],
                          capture_output=True, text=True, timeout=90, cwd=ROOT)
    rows = {row["case"]: row for row in map(json.loads, done.stdout.splitlines())}
    if done.returncode not in (0, 1):  # 2: the soak itself failed (a broker that did not start ...)
        raise AssertionError(f"crash_soak exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.returncode, rows


def test_two_sigkill_cycles_lose_no_acknowledged_message(tmp_path):
    code, rows = _soak(tmp_path, "--cycles", "2")
    for protocol in ("kafka", "remoting"):
        assert rows[f"cycles_{protocol}"]["value"] == 2
        assert rows[f"acked_lost_{protocol}"]["acked"] > 0, "nothing was acknowledged"
        assert rows[f"acked_lost_{protocol}"]["value"] == 0, rows[f"acked_lost_{protocol}"]
        assert rows[f"acked_lost_{protocol}"]["corrupt"] == 0
        assert rows[f"acked_lost_{protocol}"]["offset_gaps"] == 0
        assert rows[f"duplicates_{protocol}"]["value"] == 0  # the raw clients never retry
    assert code == 0


def test_the_soak_reports_acknowledged_writes_the_store_lost(tmp_path):
    """--sabotage zeroes the CommitLog's last 64 KiB after the kill: a soak that did not
    notice would prove nothing."""
    code, rows = _soak(tmp_path, "--cycles", "1", "--sabotage", "--min-run", "0.5")
    assert code == 1
    assert rows["acked_lost_kafka"]["value"] + rows["acked_lost_remoting"]["value"] > 0
