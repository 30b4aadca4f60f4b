"""Failover time on etcd ([failover] 35): a private etcd node, a name server and three brokers
of one group (controllerMode etcd, SYNC_MASTER), real processes on loopback. Each cycle
SIGKILLs the current master and measures, from the kill, when etcd names a new master
(`elected`) and when a native-client send is first acknowledged SEND_OK through it
(`first_ack`: each attempt a fresh producer, i.e. a client that asks the name server again
after a failed send; RocketMQ's own clients also refresh routes every 30 s); then the
killed node is started again and the cycle waits until all three are in the in-sync set.
Rows: p50/p99/max of both over ``--kills`` cycles (issue floor for RocketMQ clients: 35 s),
and the load average. ``--kafka`` also times one long-lived idempotent confluent-kafka
producer (acks=all, a record every 100 ms, bootstrapped with every node) from the kill to
its first delivery report through the new master (issue floor for Kafka clients: 10 s);
``--cpp`` the RocketMQ C++ client likewise. ``--steady N`` first measures what the election costs in steady
state: N native sync sends of 100 B (64 in flight) to the same three-node SYNC_MASTER
group with and without controllerMode etcd (classic: brokerId 0 SYNC_MASTER and two
SLAVEs), alternated ``--rounds`` times; `steady_ratio` is etcd over classic msg/s (issue
floor 0.95)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer as KafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rocketport.client import Message, Producer  # noqa: E402
from rocketport.client.message import SendStatus  # noqa: E402
from tests.failover.cluster import group_node, in_sync_set, leader_id, send_many, send_one  # noqa: E402
from tests.ha.cluster import node, start_namesrv, wait_for  # noqa: E402
from tests.support.etcd import etcd_cluster  # noqa: E402
from tests.support.processes import stop  # noqa: E402

TOPIC = "FailoverBench"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def send_rate(namesrv: str, messages: int, concurrency: int = 64) -> float:
    """msg/s of ``messages`` sync sends of 100 B, ``concurrency`` in flight, all SEND_OK."""
    body = b"x" * 100
    async with Producer(namesrv, "steady-bench", retry_times_when_send_failed=0) as producer:
        await producer.send(Message(TOPIC, body))  # the topic and the route

        async def worker(n: int) -> None:
            for _ in range(n):
                status = (await producer.send(Message(TOPIC, body))).status
                if status is not SendStatus.SEND_OK:
                    raise RuntimeError(f"send answered {status}")
        start = time.perf_counter()
        await asyncio.gather(*(worker(messages // concurrency) for _ in range(concurrency)))
        return messages // concurrency * concurrency / (time.perf_counter() - start)


def steady_case(base: Path, kind: str, messages: int) -> float:
    """One group of three started fresh (classic roles or an election), its send rate."""
    etcd = etcd_cluster(base / "etcd") if kind == "etcd" else None
    if etcd is not None:
        etcd.start()
    namesrv_proc, namesrv = start_namesrv(base)
    if etcd is not None:
        nodes = [group_node(base, i, namesrv, etcd.endpoints, "etcdLeaseTtl=10",
                            "etcdCheckInterval=500") for i in (1, 2, 3)]
    else:
        nodes = [node(base, "n0", namesrv, "brokerRole=SYNC_MASTER")] + \
            [node(base, f"n{i}", namesrv, "brokerRole=SLAVE", f"brokerId={i}") for i in (1, 2)]
    try:
        for n in nodes:
            n.broker.start()
        if etcd is not None:
            wait_for(lambda: in_sync_set(etcd.endpoints) == [1, 2, 3], timeout=120, what="in sync")
        else:
            wait_for(lambda: send_one(namesrv, TOPIC, b"probe") is SendStatus.SEND_OK, timeout=120,
                     what="a slave in sync")
        return asyncio.run(send_rate(namesrv, messages))
    finally:
        for n in nodes:
            n.broker.stop()
        stop(namesrv_proc)
        if etcd is not None:
            etcd.stop()
        shutil.rmtree(base, ignore_errors=True)


def steady(messages: int, rounds: int) -> None:
    rates: dict[str, list[float]] = {"classic": [], "etcd": []}
    for r in range(rounds):
        for kind in ("classic", "etcd"):
            rate = steady_case(Path(tempfile.mkdtemp(prefix=f"failover_steady_{kind}_")), kind, messages)
            rates[kind].append(rate)
            print(json.dumps({"bench": "failover", "case": f"steady_send_100B_{kind}", "round": r,
                              "value": round(rate), "unit": "msg/s", "load": os.getloadavg()[0]}), flush=True)
    ratio = statistics.median(rates["etcd"]) / statistics.median(rates["classic"])
    print(json.dumps({"bench": "failover", "case": "steady_ratio", "value": round(ratio, 3), "unit": "x",
                      "floor": 0.95, "peer": "classic roles", "peer_value": round(statistics.median(rates["classic"])),
                      "meets_floor": ratio >= 0.95, "rounds": rounds, "messages": messages}), flush=True)


class Sender:
    """A client sending in the background; ``lines`` has one {"t": wall time sent, "ok": bool}
    per attempt, and "acked_at" when the answer came later than the attempt (a delivery report)."""

    lines: queue.Queue[dict]

    def first_ok_after(self, t: float, timeout: float) -> float | None:
        """Wall time a send made after ``t`` was first acknowledged (None: none within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line["ok"] and line["t"] > t:
                return line.get("acked_at", line["t"])
        return None


class KafkaSender(Sender):
    """An idempotent confluent-kafka producer (acks=all) producing a record every 100 ms in
    a thread; the wall time of each acknowledged record kept (librdkafka holds the records
    produced while no master answers and delivers them to the new one)."""

    def __init__(self, bootstrap: str, extra: dict[str, str]) -> None:
        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                       "acks": "all", "message.timeout.ms": 300_000, "linger.ms": 0, **extra})
        self.lines: queue.Queue[dict] = queue.Queue()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while self.running:
            sent = time.time()
            # a report is timed by when the record was produced: one the old master took just
            # before the kill may be reported up to a poll later, and is not through the new one
            self.producer.produce(TOPIC, b"kafka-%d" % i, on_delivery=lambda err, msg, sent=sent:
                                  self.lines.put({"t": sent, "ok": err is None, "acked_at": time.time()}))
            i += 1
            self.producer.poll(0.1)

    def stop(self) -> None:
        self.running = False
        self.thread.join(10)
        self.producer.flush(10)


class CppSender(Sender):
    """failover_cpp_sender.py as a subprocess, its lines read in a thread."""

    def __init__(self, namesrv: str, seconds: float) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "failover_cpp_sender.py"),
                                      namesrv, TOPIC, str(seconds)], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--ttl", type=int, default=10, help="etcdLeaseTtl (s); the default is the broker's")
    parser.add_argument("--check-interval", type=int, default=500, help="etcdCheckInterval (ms)")
    parser.add_argument("--steady", type=int, default=0, help="sends per steady-state case (0: none)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kafka", action="store_true",
                        help="also time an idempotent confluent-kafka producer (a record every 100 ms)")
    parser.add_argument("--kafka-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting for --kafka's producer (e.g. reconnect.backoff.max.ms=1000)")
    parser.add_argument("--cpp", action="store_true",
                        help="also time the RocketMQ C++ client (a sync send every 100 ms)")
    args = parser.parse_args()
    if args.steady:
        steady(args.steady, args.rounds)
    if not args.kills:
        return
    base = Path(tempfile.mkdtemp(prefix="failover_bench_"))
    etcd = etcd_cluster(base / "etcd")
    etcd.start()
    namesrv_proc, namesrv = start_namesrv(base)
    endpoints = etcd.endpoints
    nodes = {i: group_node(base, i, namesrv, endpoints, f"etcdLeaseTtl={args.ttl}",
                           f"etcdCheckInterval={args.check_interval}", kafka=args.kafka) for i in (1, 2, 3)}
    elected: list[float] = []
    kafka_ack: list[float] = []
    kafka: KafkaSender | None = None
    first_ack: list[float] = []
    cpp_ack: list[float] = []
    try:
        nodes[1].broker.start()
        wait_for(lambda: leader_id(endpoints) == 1, timeout=60, what="node 1 elected")
        nodes[2].broker.start()
        nodes[3].broker.start()
        if args.kafka:
            kafka = KafkaSender(",".join(f"127.0.0.1:{n.kafka_port}" for n in nodes.values()),
                                dict(kv.split("=", 1) for kv in args.kafka_set))
        for cycle in range(args.kills):
            wait_for(lambda: in_sync_set(endpoints) == [1, 2, 3], timeout=120, what="all three in sync")
            old = leader_id(endpoints)
            assert old is not None
            assert len(send_many(namesrv, TOPIC, [b"warm-%d" % i for i in range(20)])) == 20
            cpp = CppSender(namesrv, 20 * args.ttl + 120) if args.cpp else None
            if cpp is not None:
                assert cpp.first_ok_after(0, 60) is not None, "the C++ client never sent"
            if kafka is not None:
                assert kafka.first_ok_after(time.time(), 60) is not None, "the Kafka producer never sent"
            t0, wall0 = time.monotonic(), time.time()
            nodes[old].broker.kill()
            wait_for(lambda: leader_id(endpoints) not in (None, old), timeout=10 * args.ttl + 30,
                     what="a new master")
            elected.append(time.monotonic() - t0)
            wait_for(lambda: send_one(namesrv, TOPIC, b"after-%d" % cycle) is SendStatus.SEND_OK,
                     timeout=10 * args.ttl + 30, what="a send acknowledged by the new master")
            first_ack.append(time.monotonic() - t0)
            if cpp is not None:
                ok_at = cpp.first_ok_after(wall0, 10 * args.ttl + 90)
                cpp.stop()
                assert ok_at is not None, "the C++ client sent nothing through the new master"
                cpp_ack.append(ok_at - wall0)
            if kafka is not None:
                ok_at = kafka.first_ok_after(wall0, 10 * args.ttl + 90)
                assert ok_at is not None, "the Kafka producer delivered nothing through the new master"
                kafka_ack.append(ok_at - wall0)
            print(json.dumps({"bench": "failover", "case": "cycle", "cycle": cycle, "killed": old,
                              "new_master": leader_id(endpoints), "elected_s": round(elected[-1], 3),
                              "first_ack_s": round(first_ack[-1], 3),
                              "cpp_first_ack_s": round(cpp_ack[-1], 3) if cpp_ack else None,
                              "kafka_first_ack_s": round(kafka_ack[-1], 3) if kafka_ack else None}), flush=True)
            nodes[old].broker.start()
        for name, values, floor in (("sigkill_to_elected", elected, None),
                                    ("sigkill_to_first_ack_native", first_ack, 35.0),
                                    ("sigkill_to_first_ack_cpp", cpp_ack, 35.0),
                                    ("sigkill_to_first_ack_kafka", kafka_ack, 10.0)):
            if not values:
                continue
            for stat in ("p50", "p99", "max"):
                value = max(values) if stat == "max" else percentile(values, float(stat[1:]))
                print(json.dumps({"bench": "failover", "case": f"{name}_{stat}", "value": round(value, 3),
                                  "unit": "s", "floor": floor, "peer": None, "peer_value": None,
                                  "kills": len(values), "ttl_s": args.ttl, "kafka_set": args.kafka_set,
                                  "mean": round(statistics.mean(values), 3)}), flush=True)
    finally:
        if kafka is not None:
            kafka.stop()
        for n in nodes.values():
            n.broker.stop()
        stop(namesrv_proc)
        etcd.stop()
        shutil.rmtree(base, ignore_errors=True)
        print(json.dumps({"bench": "failover", "case": "load", "value": os.getloadavg()[0], "unit": "loadavg1"}),
              flush=True)


if __name__ == "__main__":
    main()
