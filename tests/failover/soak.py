"""A randomised failover soak on etcd ([failover] 35), Jepsen-style in miniature: a private
etcd node, a name server and three brokers of one group (controllerMode etcd, SYNC_MASTER).
Each cycle sends with the native client, applies one fault picked at random (SIGKILL of the
master, SIGSTOP of the master past its lease then SIGCONT, SIGKILL of a slave), keeps
sending until a send is acknowledged again, puts the node back and waits until all three
are in the in-sync set. A frozen master also gets a send written into its socket while
frozen: answered SEND_OK after its successor was elected, it counts as a split-brain write.
At the end every body is read back once through the group. Run by bench/failover_soak.py
(``--cycles 20``) and, two cycles, by test_soak.py."""

from __future__ import annotations

import random
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocketport.protocols.remoting.codes import ResponseCode
from tests.failover.cluster import group_node, in_sync_set, leader_id, read_all, send_many, send_until_acked
from tests.failover.test_freeze_master import TOPIC, answer, send_frame
from tests.ha.cluster import start_namesrv, wait_for
from tests.support.etcd import etcd_cluster
from tests.support.processes import stop

FAULTS = ("kill_master", "freeze_master", "kill_slave")


@dataclass(slots=True)
class SoakResult:
    acked: int = 0
    acked_lost: int = 0
    duplicates: int = 0
    made_up: int = 0  # read but never sent
    split_brain_writes: int = 0
    faults: list[str] = field(default_factory=list)
    unavailable: dict[str, list[float]] = field(default_factory=lambda: {f: [] for f in FAULTS})


def run_soak(base: Path, cycles: int, ttl_s: int, seed: int,
             on_cycle: Callable[[int, str, int, float], None] | None = None) -> SoakResult:
    """``cycles`` random faults under an etcd election with lease TTL ``ttl_s``, in ``base``;
    every wait bounded by a multiple of the TTL. ``on_cycle(cycle, fault, victim, unavailable_s)``
    is told each cycle's outcome."""
    rng = random.Random(seed)
    result = SoakResult()
    etcd = etcd_cluster(base / "etcd")
    etcd.start()
    namesrv_proc, namesrv = start_namesrv(base)
    endpoints = etcd.endpoints
    nodes = {i: group_node(base, i, namesrv, endpoints, f"etcdLeaseTtl={ttl_s}") for i in (1, 2, 3)}
    bound = 10 * ttl_s + 30
    acked: list[bytes] = []
    sent: set[bytes] = set()
    fresh = (b"m-%07d" % i for i in range(1 << 30))

    try:
        nodes[1].broker.start()
        wait_for(lambda: leader_id(endpoints) == 1, timeout=60, what="node 1 elected")
        nodes[2].broker.start()
        nodes[3].broker.start()
        for cycle in range(cycles):
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
                body = b"frozen-%03d" % cycle
                sent.add(body)
                stale.sendall(send_frame(body))
                wait_for(lambda: leader_id(endpoints) not in (None, victim), timeout=bound, what="a new master")
                send_until_acked(namesrv, TOPIC, fresh, sent, acked, bound)
                result.unavailable[fault].append(time.monotonic() - t0)
                proc.send_signal(signal.SIGCONT)
                if answer(stale, 10) == ResponseCode.SUCCESS:
                    result.split_brain_writes += 1
                stale.close()
            else:
                nodes[victim].broker.kill()
                send_until_acked(namesrv, TOPIC, fresh, sent, acked, bound)
                result.unavailable[fault].append(time.monotonic() - t0)
                nodes[victim].broker.start()
            result.faults.append(fault)
            if on_cycle is not None:
                on_cycle(cycle, fault, victim, result.unavailable[fault][-1])
        wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=bound, what="all three in sync")
        read = read_all(namesrv, TOPIC, "soak-reader", acked, timeout_s=120)
    finally:
        for n in nodes.values():
            if n.broker.proc is not None and n.broker.proc.poll() is None:
                n.broker.proc.send_signal(signal.SIGCONT)
            n.broker.stop()
        stop(namesrv_proc)
        etcd.stop()
    counts = Counter(read)
    result.acked = len(acked)
    result.acked_lost = len(set(acked) - set(read))
    result.duplicates = sum(c - 1 for c in counts.values())
    result.made_up = len(set(read) - sent)
    return result
