"""A randomised failover soak on etcd ([failover] 35), Jepsen-style in miniature: N cycles
of a random fault (SIGKILL of the master, SIGSTOP of the master past its lease then
SIGCONT, SIGKILL of a slave) while the native client sends; tests/failover/soak.py runs it
(two cycles of it are in the default suite, tests/failover/test_soak.py).
Rows: ``acked_lost``, ``duplicates``, ``made_up``, ``split_brain_writes`` (floor 0 each),
the unavailability (fault to first acknowledged send) per fault kind, and the load average."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.failover.soak import run_soak  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--ttl", type=int, default=3, help="etcdLeaseTtl (s)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    base = Path(tempfile.mkdtemp(prefix="failover_soak_"))

    def on_cycle(cycle: int, fault: str, victim: int, unavailable_s: float) -> None:
        print(json.dumps({"bench": "failover_soak", "case": "cycle", "cycle": cycle, "fault": fault,
                          "victim": victim, "unavailable_s": round(unavailable_s, 3)}), flush=True)
    try:
        result = run_soak(base, args.cycles, args.ttl, seed, on_cycle)
        rows = [("acked_lost", result.acked_lost, 0), ("duplicates", result.duplicates, 0),
                ("made_up", result.made_up, 0), ("split_brain_writes", result.split_brain_writes, 0),
                ("acked", result.acked, None)]
        for case, value, floor in rows:
            print(json.dumps({"bench": "failover_soak", "case": case, "value": value, "unit": "messages",
                              "floor": floor, "peer": None, "peer_value": None, "seed": seed,
                              "cycles": args.cycles}), flush=True)
        for fault, values in result.unavailable.items():
            if values:
                print(json.dumps({"bench": "failover_soak", "case": f"unavailable_{fault}_max",
                                  "value": round(max(values), 3), "unit": "s", "floor": None, "peer": None,
                                  "peer_value": None, "n": len(values), "ttl_s": args.ttl}), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        print(json.dumps({"bench": "failover_soak", "case": "load", "value": os.getloadavg()[0],
                          "unit": "loadavg1"}), flush=True)


if __name__ == "__main__":
    main()
