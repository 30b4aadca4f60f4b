"""A randomised failover soak on etcd ([failover] 35), Jepsen-style in miniature: a private
etcd node, a name server and three brokers of one group (controllerMode etcd, SYNC_MASTER).
Each of ``--cycles`` cycles sends with the native client, applies one fault picked at
random (SIGKILL of the master, SIGSTOP of the master past its lease then SIGCONT, SIGKILL
of a slave), keeps sending until a send is acknowledged again, puts the node back and
waits until all three are in the in-sync set. A frozen master also gets a send written
into its socket while frozen: answered SEND_OK after its successor was elected, it counts
as a split-brain write. At the end every body is read back once through the group.
Rows: ``acked_lost``, ``duplicates``, ``split_brain_writes`` (floor 0 each), the
unavailability (fault to first acknowledged send) per fault kind, and the load average."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rocketport.client.message import SendStatus  # noqa: E402
from rocketport.protocols.remoting.codes import ResponseCode  # noqa: E402
from tests.failover.cluster import group_node, in_sync_set, leader_id, read_all, send_many, send_one  # noqa: E402
from tests.failover.test_freeze_master import answer, send_frame  # noqa: E402
from tests.ha.cluster import start_namesrv, wait_for  # noqa: E402
from tests.support.etcd import etcd_cluster  # noqa: E402
from tests.support.processes import stop  # noqa: E402

TOPIC = "FrozenTopic"  # send_frame's topic
FAULTS = ("kill_master", "freeze_master", "kill_slave")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--ttl", type=int, default=3, help="etcdLeaseTtl (s)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="failover_soak_"))
    etcd = etcd_cluster(base / "etcd")
    etcd.start()
    namesrv_proc, namesrv = start_namesrv(base)
    endpoints = etcd.endpoints
    nodes = {i: group_node(base, i, namesrv, endpoints, f"etcdLeaseTtl={args.ttl}") for i in (1, 2, 3)}
    bound = 10 * args.ttl + 30
    acked: list[bytes] = []
    sent: set[bytes] = set()
    split_brain = 0
    unavailable: dict[str, list[float]] = {f: [] for f in FAULTS}
    counter = iter(range(1 << 30))

    def send_until_acked() -> None:
        def once() -> bool:
            body = b"m-%07d" % next(counter)
            sent.add(body)
            if send_one(namesrv, TOPIC, body) is SendStatus.SEND_OK:
                acked.append(body)
                return True
            return False
        wait_for(once, timeout=bound, what="an acknowledged send")

    try:
        nodes[1].broker.start()
        wait_for(lambda: leader_id(endpoints) == 1, timeout=60, what="node 1 elected")
        nodes[2].broker.start()
        nodes[3].broker.start()
        for cycle in range(args.cycles):
            wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=bound, what="all three in sync")
            bodies = [b"c%03d-%05d" % (cycle, i) for i in range(100)]
            sent.update(bodies)
            acked += send_many(namesrv, TOPIC, bodies)
            fault = rng.choice(FAULTS)
            master = leader_id(endpoints)
            assert master is not None
            victim = master if fault != "kill_slave" else rng.choice([i for i in nodes if i != master])
            t0 = time.monotonic()
            if fault == "freeze_master":
                proc = nodes[victim].broker.proc
                proc.send_signal(signal.SIGSTOP)
                stale = socket.create_connection(("127.0.0.1", nodes[victim].port), timeout=5)
                stale.sendall(send_frame(b"frozen-%03d" % cycle))
                wait_for(lambda: leader_id(endpoints) not in (None, victim), timeout=bound, what="a new master")
                send_until_acked()
                unavailable[fault].append(time.monotonic() - t0)
                proc.send_signal(signal.SIGCONT)
                if answer(stale, 10) == ResponseCode.SUCCESS:
                    split_brain += 1
                stale.close()
            else:
                nodes[victim].broker.kill()
                send_until_acked()
                unavailable[fault].append(time.monotonic() - t0)
                nodes[victim].broker.start()
            print(json.dumps({"bench": "failover_soak", "case": "cycle", "cycle": cycle, "fault": fault,
                              "victim": victim, "unavailable_s": round(unavailable[fault][-1], 3)}), flush=True)
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=bound, what="all three in sync")
        read = read_all(namesrv, TOPIC, "soak-reader", acked, timeout_s=120)
        counts = Counter(read)
        rows = [("acked_lost", len(set(acked) - set(read)), 0), ("duplicates", sum(c - 1 for c in counts.values()), 0),
                ("made_up", len(set(read) - sent - {b"frozen-%03d" % c for c in range(args.cycles)}), 0),
                ("split_brain_writes", split_brain, 0), ("acked", len(acked), None)]
        for case, value, floor in rows:
            print(json.dumps({"bench": "failover_soak", "case": case, "value": value, "unit": "messages",
                              "floor": floor, "peer": None, "peer_value": None, "seed": seed,
                              "cycles": args.cycles}), flush=True)
        for fault, values in unavailable.items():
            if values:
                print(json.dumps({"bench": "failover_soak", "case": f"unavailable_{fault}_max",
                                  "value": round(max(values), 3), "unit": "s", "floor": None, "peer": None,
                                  "peer_value": None, "n": len(values), "ttl_s": args.ttl}), flush=True)
    finally:
        for n in nodes.values():
            if n.broker.proc is not None and n.broker.proc.poll() is None:
                n.broker.proc.send_signal(signal.SIGCONT)
            n.broker.stop()
        stop(namesrv_proc)
        etcd.stop()
        shutil.rmtree(base, ignore_errors=True)
        print(json.dumps({"bench": "failover_soak", "case": "load", "value": os.getloadavg()[0],
                          "unit": "loadavg1"}), flush=True)


if __name__ == "__main__":
    main()
