"""Replication (core/ha): issue 34's speed floors with real broker processes on loopback: a
standalone broker, an ASYNC_MASTER and a SYNC_MASTER (ASYNC_FLUSH) each with a slave, in the
same run, and a slave's catch-up speed.

Rows (one JSON object per line, see bench/README.md):
  send_100B_<role>        native-client sync sends of 100 B, ``--concurrency`` in flight (the
                          remoting send lane): msg/s, p50/p99 latency (ms), the broker's CPU (and
                          its slave's) a message, the broker's system CPU a message, how long the
                          broker's and the client's loop threads waited for a CPU, and on a
                          master the bytes its slave had not acknowledged when the clock stopped
  batch_100B_<role>       native-client batch sends (``--batch`` x 100 B, ``--batch-in-flight`` 32 in
                          flight): msg/s
  kafka_100B_<role>       bench/kafka_bench.py's raw pipelined producer, acks=-1 (all): msg/s
  <kind>_<role>_ratio     a role's msg/s over the standalone broker's of the same round, the
                          median of ``--rounds`` rounds (each runs the three roles in turn; one
                          40 s run swung by +-0.3 on this VM), every round's in ``rounds``, with
                          its ``floor`` (ASYNC_MASTER 0.9, SYNC_MASTER 0.6: issue 34), and
                          master_cpu_ratio: the standalone broker's CPU a message over the master's
  with ``--baseline REV`` the send rows again with commit REV's code ("code": "baseline")
  lag_100B_<rate>         an ASYNC_MASTER sent 100 B messages at ``--lag-rate`` msg/s (native client,
                          sends paced every 5 ms) for ``--lag-seconds``: p50/p99/max of each record's
                          time from the master's store to the slave's dispatch, as the slave counts it
                          (its clock at dispatch minus the store timestamp in the record, runtime key
                          haSlaveLagMs; one machine: one clock), floor p99 5 ms; with how long each
                          broker's loop thread waited for a CPU meanwhile (schedstat: a loaded machine);
                          its slave at ``--lag-slave-nice`` (0), pinned with the clients
  catch_up_<size>         a slave connecting to a master already holding ``--behind-mb`` MB
                          (messages of <size>): MB/s from its connection until the master has its
                          acknowledgement of the whole log, with records/s and the slave's CPU a
                          record (until its key index covers the log); ``loopback_ceiling`` beside
                          it (one socket, 1 MiB writes, nothing stored)

    python bench/replication_bench.py [--messages N] [--concurrency C] [--batch-in-flight N]
                                      [--behind-mb MB] [--lag-rate R] [--lag-seconds S] [--lag-slave-nice N]
                                      [--baseline REV]
                                      [--skip-sends] [--skip-lag] [--skip-catch-up] [--no-pin]
                                      [--dir DIR]

Layout (``"layout"`` in every row): by default the broker under test (the standalone broker,
each master) runs pinned to one CPU and the bench's clients and every slave to another (but a
catch-up's slave, the process under test there, which may use every CPU): a standalone broker and a master get the same one-core budget, and the slave sits
where a real deployment puts it, off the master's core (on this 2-core machine it shares the
client's, at nice 10 so that it does not keep the client waiting). Each send row gives every
process's CPU a message and in cores (CPU seconds over the row's wall time), so a reader sees
which one is the bound. ``--no-pin`` lets the scheduler place everything on every CPU (the
slave then takes CPU from its master).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import cpu_seconds, free_port, wait_for_port  # noqa: E402
import kafka_bench  # noqa: E402

from rocketport.client import Message, Producer  # noqa: E402
from rocketport.client.transport import Connection  # noqa: E402
from rocketport.protocols.remoting import RemotingCommand, RequestCode  # noqa: E402
from rocketport.protocols.remoting.bodies import KVTable, decode_body  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOPIC = "HaBench"
# side -> CPUs its processes are pinned to ("broker": the broker under test, "client": the
# bench's own process, "slave"); empty: not pinned (set once by main from --no-pin)
AFFINITY: dict[str, set[int]] = {}
SLAVE_NICE = 10  # pinned, a slave yields its CPU to the client it shares it with


def _start_on(side: str, nice: int) -> None:
    """In a broker's child before exec: its CPUs (every thread inherits them), and a slave's
    lower priority in the send rows, so the client it shares a core with is not kept waiting."""
    os.sched_setaffinity(0, AFFINITY[side])
    if nice:
        os.nice(nice)


def layout(slave: str = "slave", nice: int = SLAVE_NICE) -> str:
    """The row's "layout"; ``slave`` is the slave's side ("any": not pinned)."""
    if not AFFINITY:
        return "unpinned: broker, slave and client share every CPU"
    cpus = {side: ",".join(map(str, sorted(c))) for side, c in AFFINITY.items()}
    where = f"cpu{cpus['slave']} (nice {nice})" if slave in AFFINITY else "any CPU"
    return f"pinned: broker cpu{cpus['broker']}; client cpu{cpus['client']}; slave {where}"


def pin_layout() -> None:
    """The broker under test on the first CPU this process may use, the clients and slaves
    on the second (both on it if there is only one)."""
    cpus = sorted(os.sched_getaffinity(0))
    other = cpus[1] if len(cpus) > 1 else cpus[0]
    AFFINITY.update(broker={cpus[0]}, client={other}, slave={other})
    os.sched_setaffinity(0, AFFINITY["client"])


def system_seconds(pid: int) -> float:
    """System CPU of process ``pid`` (Linux /proc): the kernel's share of its cost, where the
    page cache's faults and the sockets' copies go."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[12]) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """The bench process's CPU (every thread): the clients'."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Node:
    """One broker process: remoting on ``port``, its HA port, other front-ends off."""

    def __init__(self, root: Path, *settings: str, env: dict[str, str] | None = None,
                 ports: tuple[int, int, int, int] | None = None, side: str = "broker",
                 nice: int | None = None) -> None:
        self.ports = ports or (free_port(), free_port(), free_port(), free_port())
        self.port, self.namesrv_port, self.ha_port, self.kafka_port = self.ports
        args = [f"storePathRootDir={root}", f"listenPort={self.port}", f"haListenPort={self.ha_port}",
                f"namesrv.port={self.namesrv_port}", "kafka.enabled=true", f"kafka.port={self.kafka_port}",
                f"defaultTopicQueueNums={kafka_bench.PARTITIONS}", "amqp.enabled=false",
                "stomp.enabled=false", "http.enabled=false", *settings]
        # a baseline's code from its own tree: started in this checkout, ``-m rocketport`` would
        # find this checkout's package first (the working directory precedes PYTHONPATH)
        cwd = REPO if env is None else Path(env["PYTHONPATH"]).parent / "src"
        self.proc = subprocess.Popen([sys.executable, "-m", "rocketport", "broker", "-c", "conf/broker.yaml",
                                      *[a for s in args for a in ("--set", s)]],
                                     cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                     preexec_fn=(lambda: _start_on(side, (SLAVE_NICE if side == "slave" else 0)
                                                                   if nice is None else nice))
                                     if side in AFFINITY else None)
        self.started = time.monotonic()
        wait_for_port(self.port, self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def runtime(port: int) -> dict[str, str]:
    conn = await Connection.open(f"127.0.0.1:{port}")
    try:
        resp = await conn.invoke(RemotingCommand(code=int(RequestCode.GET_BROKER_RUNTIME_INFO)), 5)
        return decode_body(KVTable, resp.body).table
    finally:
        conn.close()


async def until(predicate, timeout: float = 600.0, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(step)
    raise TimeoutError("the bench's condition never came")


async def in_sync(master: Node) -> bool:
    return (await runtime(master.port)).get("haInSyncSlaves", "0") != "0"


async def sends(master: Node, messages: int, concurrency: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    body = b"x" * 100
    async with Producer(f"127.0.0.1:{master.namesrv_port}", "ha-bench", retry_times_when_send_failed=0) as producer:
        await producer.send(Message(TOPIC, body))  # the topic and the route

        async def worker(n: int) -> None:
            for _ in range(n):
                t = time.perf_counter()
                result = await producer.send(Message(TOPIC, body))
                latencies.append(time.perf_counter() - t)
                if result.status.value != "SEND_OK":
                    raise RuntimeError(f"send answered {result.status}")
        start = time.perf_counter()
        await asyncio.gather(*(worker(messages // concurrency) for _ in range(concurrency)))
        return time.perf_counter() - start, latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def batch_sends(master: Node, messages: int, per_batch: int, in_flight: int) -> float:
    """Seconds for ``messages`` 100 B messages in batch sends of ``per_batch``, ``in_flight``
    at a time."""
    body = b"x" * 100
    async with Producer(f"127.0.0.1:{master.namesrv_port}", "ha-bench-batch", retry_times_when_send_failed=0) as producer:
        await producer.send_batch([Message(TOPIC, body)])
        left = iter(range(messages // per_batch))

        async def worker() -> None:
            for _ in left:
                result = await producer.send_batch([Message(TOPIC, body) for _ in range(per_batch)])
                if result.status.value != "SEND_OK":
                    raise RuntimeError(f"batch send answered {result.status}")
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.perf_counter() - start


ROLES = ("STANDALONE", "ASYNC_MASTER", "SYNC_MASTER")
FLOORS = {"ASYNC_MASTER": 0.9, "SYNC_MASTER": 0.6}


def send_cases(base: Path, role: str, args: argparse.Namespace, env: dict[str, str] | None,
               code: str) -> list[dict]:
    """The three producers against one broker (with a slave in sync unless STANDALONE)."""
    root = Path(tempfile.mkdtemp(prefix=f"{code}-{role}-", dir=base))  # a fresh store each round
    master = Node(root / "m", f"brokerRole={'ASYNC_MASTER' if role == 'STANDALONE' else role}", env=env)
    slave = None if role == "STANDALONE" else Node(
        root / "s", "brokerRole=SLAVE", "brokerId=1", f"haMasterAddress=127.0.0.1:{master.ha_port}",
        "namesrv.enabled=false", "kafka.enabled=false", env=env, side="slave")
    rows = []
    common = {"bench": "ha", "role": role, "code": code, "flush": "ASYNC_FLUSH", "layout": layout()}
    try:
        if slave is not None:
            asyncio.run(until(lambda: in_sync(master)))

        def cpu() -> tuple[float, ...]:
            return (cpu_seconds(master.proc.pid), cpu_seconds(slave.proc.pid) if slave is not None else 0.0,
                    own_cpu_seconds(), system_seconds(master.proc.pid), runqueue_ms(master.proc.pid),
                    runqueue_ms(os.getpid()))

        def cpu_fields(before: tuple[float, ...], n: int, seconds: float) -> dict:
            """Each process's CPU a message and in cores over the row (near 1.0 on a pinned
            core: that process is the bound)."""
            used = [a - b for a, b in zip(cpu(), before)]
            fields = {}
            for name, spent in zip(("broker", "slave", "client"), used):
                if name != "slave" or slave is not None:
                    fields[f"{name}_cpu_us_per_msg"] = round(spent / n * 1e6, 2)
                    fields[f"{name}_cores"] = round(spent / seconds, 2)
            fields["broker_sys_us_per_msg"] = round(used[3] / n * 1e6, 3)
            # how long the broker's loop thread and the client's were runnable but kept off a
            # CPU (in a master's row the client shares its core with the slave)
            fields["broker_runqueue_ms"], fields["client_runqueue_ms"] = round(used[4]), round(used[5])
            if slave is not None:  # at the row's end (an ASYNC_MASTER's backlog)
                fields["slave_behind_bytes"] = asyncio.run(behind(master))
            return fields
        before = cpu()
        seconds, latencies = asyncio.run(sends(master, args.messages, args.concurrency))
        n = len(latencies)
        rows.append({**common, "case": f"send_100B_{role.lower()}", "value": round(n / seconds), "unit": "msg/s",
                     "p50_ms": round(_pct(latencies, 0.5), 2), "p99_ms": round(_pct(latencies, 0.99), 2),
                     "messages": n, "concurrency": args.concurrency, **cpu_fields(before, n, seconds)})
        n = args.messages * 4 // args.batch * args.batch
        before = cpu()
        seconds = asyncio.run(batch_sends(master, n, args.batch, args.batch_in_flight))
        rows.append({**common, "case": f"batch_100B_{role.lower()}", "value": round(n / seconds), "unit": "msg/s",
                     "messages": n, "per_batch": args.batch, "in_flight": args.batch_in_flight,
                     **cpu_fields(before, n, seconds)})
        topic = "HaBenchKafka"
        asyncio.run(kafka_bench.create_topic(master.kafka_port, topic))
        n = args.kafka_messages
        before = cpu()
        seconds = asyncio.run(kafka_bench.raw_plain_produce(master.kafka_port, topic, 100, n, 4000))
        rows.append({**common, "case": f"kafka_100B_{role.lower()}", "value": round(n / seconds), "unit": "msg/s",
                     "messages": n, "acks": -1, "per_request": 4000, **cpu_fields(before, n, seconds)})
    finally:
        if slave is not None:
            slave.stop()
        master.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def ratio_rows(rows: list[dict], code: str) -> list[dict]:
    """Per role and kind: the median over rounds of (its msg/s / the standalone broker's of
    the same round), so a slow phase of the machine during one row does not decide."""
    out = []
    by = {(r["round"], r["role"], r["case"].split("_")[0]): r for r in rows if r["code"] == code}
    rounds = sorted({r["round"] for r in rows if r["code"] == code})
    for role, floor in FLOORS.items():
        for kind in ("send", "batch", "kafka"):
            pairs = [(by[(n, role, kind)], by[(n, "STANDALONE", kind)]) for n in rounds]
            ratios = [round(row["value"] / alone["value"], 2) for row, alone in pairs]
            cpu = [round(alone["broker_cpu_us_per_msg"] / row["broker_cpu_us_per_msg"], 2) for row, alone in pairs]
            value = statistics.median(ratios)
            out.append({"bench": "ha", "case": f"{kind}_{role.lower()}_ratio", "code": code, "value": value,
                        "unit": "x", "floor": floor, "meets_floor": value >= floor, "rounds": ratios,
                        "layout": pairs[0][0]["layout"], "master_cpu_ratio": statistics.median(cpu),
                        "master_cpu_ratio_rounds": cpu,
                        "note": f"{role}+slave msg/s over a standalone broker's of the same round, median of "
                                f"the rounds; master_cpu_ratio: the standalone broker's CPU a message over "
                                f"this master's (what replication costs the master, whatever the load)"})
    return out


def lag_counts(text: str) -> dict[int, int]:
    return {int(ms): int(n) for ms, n in (pair.split(":") for pair in text.split(",") if pair)}


def _lag_pct(counts: dict[int, int], q: float) -> int:
    total, seen = sum(counts.values()), 0
    for ms in sorted(counts):
        seen += counts[ms]
        if seen >= q * total:
            return ms
    return -1


async def paced_sends(master: Node, rate: int, seconds: float) -> int:
    """100 B sends at ``rate`` msg/s for ``seconds``: every 5 ms the sends due, at most 1,000
    in flight; returns how many were answered."""
    body = b"x" * 100
    done = 0
    room = asyncio.Semaphore(1000)
    async with Producer(f"127.0.0.1:{master.namesrv_port}", "ha-lag", retry_times_when_send_failed=0) as producer:
        await producer.send(Message(TOPIC, body))

        async def one() -> None:
            nonlocal done
            try:
                await producer.send(Message(TOPIC, body))
                done += 1
            finally:
                room.release()
        tasks = set()
        start = time.perf_counter()
        sent = 0
        while (now := time.perf_counter() - start) < seconds:
            for _ in range(int(now * rate) - sent):
                await room.acquire()
                task = asyncio.create_task(one())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += 1
            await asyncio.sleep(0.005)
        await asyncio.gather(*tasks)
    return done


def runqueue_ms(pid: int) -> float:
    """How long the main (event-loop) thread of ``pid`` has waited on a run queue, runnable
    but not running (Linux schedstat), in ms."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e6


def settle() -> float:
    """Wait until the file system has written what the cases before left it (dirty pages,
    their deleted stores' journal commits), so that a case does not share the disk with
    them; returns the seconds it took (0.0-0.0x s in every run so far: a precaution)."""
    start = time.monotonic()
    os.sync()
    return time.monotonic() - start


def lag_case(base: Path, args: argparse.Namespace, env: dict[str, str] | None, code: str) -> dict:
    root = base / f"{code}-lag"
    settled = settle()
    master = Node(root / "m", "brokerRole=ASYNC_MASTER", env=env)
    slave = Node(root / "s", "brokerRole=SLAVE", "brokerId=1", f"haMasterAddress=127.0.0.1:{master.ha_port}",
                 "namesrv.enabled=false", "kafka.enabled=false", env=env, side="slave", nice=args.lag_slave_nice)
    try:
        asyncio.run(until(lambda: in_sync(master)))
        before = lag_counts(asyncio.run(runtime(slave.port)).get("haSlaveLagMs", ""))
        waited = [runqueue_ms(master.proc.pid), runqueue_ms(slave.proc.pid)]
        sent = asyncio.run(paced_sends(master, args.lag_rate, args.lag_seconds))
        waited = [runqueue_ms(master.proc.pid) - waited[0], runqueue_ms(slave.proc.pid) - waited[1]]

        async def caught_up() -> bool:
            m, sl = await runtime(master.port), await runtime(slave.port)
            return sl.get("haSlaveOffset") == m.get("commitLogMaxOffset")
        asyncio.run(until(caught_up))
        after = lag_counts(asyncio.run(runtime(slave.port)).get("haSlaveLagMs", ""))
    finally:
        slave.stop()
        master.stop()
    counts = {ms: n - before.get(ms, 0) for ms, n in after.items() if n - before.get(ms, 0)}
    return {"bench": "ha", "case": f"lag_100B_{args.lag_rate}", "code": code, "layout": layout(nice=args.lag_slave_nice), "value": _lag_pct(counts, 0.99),
            "unit": "ms p99", "floor": 5, "p50_ms": _lag_pct(counts, 0.5), "max_ms": max(counts, default=-1),
            "records": sum(counts.values()), "sent": sent, "rate": round(sent / args.lag_seconds),
            "master_runqueue_ms": round(waited[0]), "slave_runqueue_ms": round(waited[1]),
            "settle_s": round(settled, 2),
            "note": "master store to slave dispatch, the slave's clock minus the record's store timestamp; "
                    "*_runqueue_ms: how long each broker's event-loop thread was runnable but waiting for "
                    "a CPU during the sends (a loaded machine's share of the tail)"}


async def load(master: Node, megabytes: int, size: int) -> tuple[int, int]:
    """Fill the master with ``megabytes`` of ``size``-byte messages (batches of ~256 KiB, 8
    in flight); returns its log end and the messages sent."""
    per_batch = max(1, (256 << 10) // size)
    body = b"y" * size
    batches = (megabytes << 20) // (per_batch * size) + 1
    async with Producer(f"127.0.0.1:{master.namesrv_port}", "ha-load") as producer:
        left = iter(range(batches))

        async def worker() -> None:
            for _ in left:
                await producer.send_batch([Message(TOPIC, body) for _ in range(per_batch)])
        await asyncio.gather(*(worker() for _ in range(8)))
    return int((await runtime(master.port))["commitLogMaxOffset"]), batches * per_batch


async def behind(master: Node) -> int:
    """Bytes of the master's log its furthest slave has not acknowledged."""
    info = await runtime(master.port)
    acked = max((s["ackOffset"] for s in json.loads(info.get("haSlaves", "[]"))), default=0)
    return max(0, int(info["commitLogMaxOffset"]) - acked)


async def slaves(master: Node) -> list[dict]:
    """The master's view of its slaves (runtime key haSlaves): address, ackOffset, ..."""
    return json.loads((await runtime(master.port)).get("haSlaves", "[]"))


def catch_up_case(base: Path, size: int, args: argparse.Namespace, env: dict[str, str] | None = None,
                  code: str = "current") -> dict:
    """The master is loaded, stopped, and started again once the slave serves: the time runs
    from the slave's connection (as the master lists it) until the master has its
    acknowledgement of the whole log, both read from the master (not busy: the slave is)."""
    root = base / f"{code}-catchup{size}"
    settle()
    master = Node(root / "m", "brokerRole=ASYNC_MASTER")
    try:
        end, records = asyncio.run(load(master, args.behind_mb, size))
    finally:
        master.stop()
    settled = settle()  # the load's writeback done: the catch-up's disk is the slave's alone
    slave = Node(root / "s", "brokerRole=SLAVE", "brokerId=1", f"haMasterAddress=127.0.0.1:{master.ha_port}",
                 "namesrv.enabled=false", env=env, side="any")  # answers once its start-up is over
    try:
        master = Node(root / "m", "brokerRole=ASYNC_MASTER", ports=master.ports)
        try:
            async def connected() -> bool:
                return bool(await slaves(master))
            asyncio.run(until(connected, step=0.005))
            start = time.monotonic()
            cpu = cpu_seconds(slave.proc.pid)

            async def caught_up() -> bool:
                return any(s["ackOffset"] >= end for s in await slaves(master))
            asyncio.run(until(caught_up, step=0.01))
            seconds = time.monotonic() - start
            cpu_log = cpu_seconds(slave.proc.pid) - cpu

            async def indexed() -> bool:  # a key lookup's answer says how far the index is built
                conn = await Connection.open(f"127.0.0.1:{slave.port}")
                try:
                    resp = await conn.invoke(RemotingCommand(code=int(RequestCode.QUERY_MESSAGE), ext_fields={
                        "topic": TOPIC, "key": "none", "maxNum": "1", "beginTimestamp": "0",
                        "endTimestamp": str(2 ** 62)}), 30)
                finally:
                    conn.close()
                return int(resp.ext_fields.get("indexLastUpdatePhyoffset", 0)) >= end
            asyncio.run(until(indexed, step=0.05))
            index_seconds = time.monotonic() - start
            cpu = cpu_seconds(slave.proc.pid) - cpu
        finally:
            master.stop()
    finally:
        slave.stop()
    return {"bench": "ha", "case": f"catch_up_{size}B", "code": code, "layout": layout("any"), "floor": 200,
            "value": round(end / seconds / 1e6, 1), "unit": "MB/s", "bytes": end, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds), "slave_cpu_s": round(cpu_log, 2),
            "indexed_seconds": round(index_seconds, 3),
            "records": records, "slave_cpu_us_per_record": round(cpu * 1e6 / records, 2),
            "settle_s": round(settled, 2),
            "note": "from the slave's connection until the master has its acknowledgement of the whole log; "
                    "CPU per record until its key index covers the log too"}


def loopback_ceiling(total: int = 512 << 20) -> dict:
    """One loopback socket, 1 MiB writes, the reader discarding: what the HA stream could reach."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    got = [0]

    def drain() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1 << 20):
                got[0] += len(data)
    reader = threading.Thread(target=drain)
    reader.start()
    chunk = b"z" * (1 << 20)
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(total >> 20):
            sock.sendall(chunk)
    reader.join()
    seconds = time.perf_counter() - start
    server.close()
    return {"bench": "ha", "case": "loopback_ceiling", "value": round(got[0] / seconds / 1e6, 1), "unit": "MB/s"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # long enough that the pipelines' fill and drain (Kafka: 32 requests of 4,000 in flight)
    # are a few percent of a row, not a third of it
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--behind-mb", type=int, default=128)
    parser.add_argument("--sizes", default="1024", help="message sizes of the catch-up cases")
    parser.add_argument("--batch", type=int, default=32, help="messages per native batch send")
    # enough that the standalone broker is the bound (at 8 it idled a fifth of the time)
    parser.add_argument("--batch-in-flight", type=int, default=32, help="native batch sends in flight")
    parser.add_argument("--kafka-messages", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the send rows (ratios: their median)")
    parser.add_argument("--baseline", default=None, help="a commit whose code runs the send rows too")
    parser.add_argument("--skip-catch-up", action="store_true")
    parser.add_argument("--skip-lag", action="store_true")
    parser.add_argument("--lag-rate", type=int, default=10_000)
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    parser.add_argument("--skip-sends", action="store_true")
    # the lag row's slave shares the client's CPU at nice 0: at the send rows' nice 10 it
    # waited for that CPU a tenth of the time or more, and its stalls (the whole process
    # off its CPU) made the p99
    parser.add_argument("--lag-slave-nice", type=int, default=0, help="the lag row's slave's nice (send rows: 10)")
    parser.add_argument("--no-pin", action="store_true",
                        help="no CPU pinning (default: broker under test on one CPU, clients and slaves on another)")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    if not args.no_pin:
        pin_layout()
    base = Path(tempfile.mkdtemp(prefix="ha-bench-", dir=args.dir))
    try:
        codes: list[tuple[str, dict[str, str] | None]] = [("current", None)]
        if args.baseline:
            codes.append(("baseline", kafka_bench.baseline_env(args.baseline, str(base / "baseline"))))
        rows: list[dict] = []
        for n in range(0 if args.skip_sends else args.rounds):
            for role in ROLES:  # interleaved: both codes see the same load
                for code, env in codes:
                    for row in send_cases(base, role, args, env, code):
                        row["round"] = n
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        for code, _ in codes if rows else ():
            for row in ratio_rows(rows, code):
                print(json.dumps(row), flush=True)
        if not args.skip_lag:  # the slave's lag counts are this code's (haSlaveLagMs)
            print(json.dumps(lag_case(base, args, None, "current")), flush=True)
        if not args.skip_catch_up:
            for size in (int(s) for s in args.sizes.split(",")):
                for code, env in codes:  # the slave runs that code
                    print(json.dumps(catch_up_case(base, size, args, env, code)), flush=True)
            print(json.dumps(loopback_ceiling()), flush=True)
        print(json.dumps({"bench": "ha", "case": "load", "value": os.getloadavg()[0], "unit": "loadavg1"}),
              flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
