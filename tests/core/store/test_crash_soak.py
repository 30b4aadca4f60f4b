"""bench/crash_soak.py, bounded: two SIGKILL cycles of a real broker under acknowledged
Kafka (acks=all, raw), remoting, STOMP (receipts) and AMQP (confirms) sends, and under a
confluent-kafka idempotent and a transactional producer that live through both kills, lose
nothing acknowledged, serve nothing corrupt, store no retry twice and kill no producer; and
the soak does report losses when the store really loses acknowledged writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOAK = os.path.join(ROOT, "bench", "crash_soak.py")
PROTOCOLS = ("kafka", "remoting", "stomp", "amqp", "kafka_idempotent", "kafka_transactional")


def _soak(tmp_path, *args: str) -> tuple[int, dict[str, dict]]:
    done = subprocess.run([sys.executable, SOAK, "--dir", str(tmp_path), "--max-run", "1.5", *args],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    rows = {row["case"]: row for row in map(json.loads, done.stdout.splitlines())}
    if done.returncode not in (0, 1):  # 2: the soak itself failed (a broker that did not start ...)
        raise AssertionError(f"crash_soak exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.returncode, rows


def test_two_sigkill_cycles_lose_no_acknowledged_message(tmp_path):
    code, rows = _soak(tmp_path, "--cycles", "2")
    for protocol in PROTOCOLS:
        lost = rows[f"acked_lost_{protocol}"]
        assert rows[f"cycles_{protocol}"]["value"] == 2
        assert lost["acked"] > 0, f"nothing was acknowledged over {protocol}"
        assert lost["value"] == 0, lost
        assert lost["corrupt"] == 0, lost
        assert lost["offset_gaps"] == 0, lost
        # the raw clients never retry; the confluent ones do, and the broker must know
        assert rows[f"duplicates_{protocol}"]["value"] == 0
    for protocol in ("kafka_idempotent", "kafka_transactional"):
        assert rows[f"fatal_errors_{protocol}"]["value"] == 0
    assert code == 0


def test_the_soak_reports_acknowledged_writes_the_store_lost(tmp_path):
    """--sabotage zeroes the CommitLog's last 64 KiB after the kill: a soak that did not
    notice would prove nothing."""
    code, rows = _soak(tmp_path, "--cycles", "1", "--sabotage", "--min-run", "0.5")
    assert code == 1
    assert sum(rows[f"acked_lost_{protocol}"]["value"] for protocol in PROTOCOLS) > 0
