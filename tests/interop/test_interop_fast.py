"""The interop matrix's fast subset in the default suite: `python -m interop --json`, as a
user runs it (a fresh subprocess broker, one worker per client), with one client per
protocol (interop.clients.FAST) on the quick scenarios and the 12 cross-protocol pairs.
Each client and each pair is a test of its own, reading the one run's JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interop.clients import CLIENTS, FAST, load
from interop.scenarios import SCENARIOS

REPO = Path(__file__).resolve().parents[2]
PROTOCOLS = ("remoting", "kafka", "stomp", "amqp")
FAST_SCENARIOS = [s.name for s in SCENARIOS if s.fast]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("interop")
    proc = subprocess.run([sys.executable, "-m", "interop", "--json", str(work / "interop.json"),
                           "--md", str(work / "interop.md"), "--workdir", str(work / "run")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((work / "interop.json").read_text())
    result["_md"] = (work / "interop.md").read_text()
    result["_progress"] = proc.stderr
    return result


def test_the_run_reports_in_the_issue_s_shape(matrix):
    assert set(matrix) >= {"broker", "clients", "cross_protocol"}
    assert {"version", "date"} <= set(matrix["broker"])
    assert [c["name"] for c in matrix["clients"]] == list(FAST.values())
    for client in matrix["clients"]:
        assert {"name", "version", "protocol", "cells"} <= set(client)
        assert client["protocol"] == CLIENTS[client["name"]][1] and client["version"]
        assert list(client["cells"]) == FAST_SCENARIOS
        for cell in client["cells"].values():
            assert cell in ("pass", "n/a") or cell.startswith("fail: ")
    # a progress line per client, and the table in the Markdown
    for name in FAST.values():
        assert f"[interop] {name} " in matrix["_progress"]
        assert f"| {name} | " in matrix["_md"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fast_client_passes_every_quick_scenario(matrix, protocol):
    row = next(c for c in matrix["clients"] if c["name"] == FAST[protocol])
    lacks = load(row["name"]).lacks  # n/a only where the adapter says why
    failing = {s: v for s, v in row["cells"].items() if v != "pass" and not (v == "n/a" and s in lacks)}
    assert failing == {}, f"{row['name']}: {failing}"


@pytest.mark.parametrize("pair", [f"{a}->{b}" for a in PROTOCOLS for b in PROTOCOLS if a != b])
def test_cross_protocol_pair(matrix, pair):
    assert matrix["cross_protocol"][pair] == "pass"


def test_the_fast_subset_leaves_the_shared_group_pairs_to_the_full_run(matrix):
    assert len(matrix["cross_protocol"]) == 12
