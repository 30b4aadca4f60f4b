"""One broker, many queues ([scale]): N topics x 4 queues created with confluent-kafka's
AdminClient, one record into every queue, a consumer group reading them all back (four
librdkafka members, and four of the bench's own, group_read_raw: librdkafka is the bound
at 100,000 partitions), topic listings, a clean restart and a SIGKILL recovery, with the broker's RSS and open
descriptors sampled from /proc throughout; RabbitMQ (a private node, bench/peers) declaring
as many durable queues with pika in the same run, for the creation and memory rows.

    python bench/scale_bench.py [--topics N] [--skip-rabbitmq] [--dir DIR]

Default N=25,000 (100,000 queues). Prints one JSON row per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from procs import cpu_seconds, free_port, wait_for_port

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUEUES = 4
BATCH = 1000  # topics per CreateTopics request


def own_cpu_s() -> float:
    """CPU seconds (user + system) of this process and its threads, with the producer and
    consumer processes once they have ended: the client's side of a phase (librdkafka's
    per-topic work grows with the topic count)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Cpu:
    """The broker's and this client's CPU seconds over a phase."""

    def __init__(self, pid: int, group: bool = False) -> None:
        self.broker_cpu = lambda: cpu_seconds(pid, group)  # group: a RabbitMQ node's process group
        self.broker, self.client = self.broker_cpu(), own_cpu_s()

    def spent(self) -> dict[str, float]:
        broker, client = self.broker_cpu(), own_cpu_s()
        spent = {"broker_cpu_s": round(broker - self.broker, 1), "client_cpu_s": round(client - self.client, 1)}
        self.broker, self.client = broker, client
        return spent


def row(case: str, value: float, unit: str, floor: float | None = None, **extra: object) -> None:
    print(json.dumps({"bench": "scale", "case": case, "value": round(value, 3), "unit": unit,
                      "floor": floor, **extra}), flush=True)


class Sampler:
    """RSS and open descriptors of a process (and, ``group``, its process group), every
    0.2 s: the maximum of each."""

    def __init__(self, pid: int, group: bool = False) -> None:
        self.pid, self.group = pid, group
        self.max_rss = self.max_fds = 0
        self.last_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pids(self) -> list[int]:
        if not self.group:
            return [self.pid]
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[2]) == self.pid:
                            pids.append(int(entry))
                except OSError:
                    pass
        return pids

    def sample(self) -> None:
        rss = fds = 0
        for pid in self._pids():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss += int(line.split()[1]) * 1024
                fds += len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                pass
        self.last_rss = rss
        self.max_rss, self.max_fds = max(self.max_rss, rss), max(self.max_fds, fds)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


class Broker:
    def __init__(self, store: str) -> None:
        self.store = store
        self.kafka, self.remoting, self.namesrv, self.ha = free_port(), free_port(), free_port(), free_port()
        self.proc: subprocess.Popen | None = None
        self.log = open(os.path.join(os.path.dirname(store), "broker.log"), "a")
        # a standalone name server (a broker with namesrvAddr registers with it, every 30 s)
        self.namesrv_proc = subprocess.Popen([sys.executable, "-m", "rocketport", "namesrv", "--host", "127.0.0.1",
                                              "-p", str(self.namesrv)], stdout=subprocess.DEVNULL,
                                             stderr=self.log, cwd=REPO)
        wait_for_port(self.namesrv, self.namesrv_proc)

    def start(self) -> float:
        """Seconds until the broker logs ready: its ports accept connections while the store
        still loads (they are bound first), so an open port says nothing about a restart."""
        settings = [f"storePathRootDir={self.store}", f"listenPort={self.remoting}",
                    "namesrv.enabled=false", f"kafka.port={self.kafka}", "amqp.port=0",
                    "stomp.port=0", "stomp.wsPort=0", "http.port=0", f"namesrvAddr=127.0.0.1:{self.namesrv}",
                    f"haListenPort={self.ha}"]  # (a master with namesrvAddr listens for slaves)
        args = [a for s in settings for a in ("--set", s)]
        self.log.flush()
        log_from = os.path.getsize(self.log.name)
        start = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "rocketport", "broker", "-c", "conf/broker.yaml",
                                      *args], stdout=subprocess.DEVNULL, stderr=self.log, cwd=REPO)
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            with open(self.log.name, "rb") as f:
                f.seek(log_from)
                if re.search(rb"broker \S+ ready \(pid", f.read()):
                    wait_for_port(self.kafka, self.proc, timeout_s=60)
                    return time.perf_counter() - start
            if self.proc.poll() is not None:
                raise RuntimeError("the broker exited")
            time.sleep(0.1)
        raise RuntimeError("the broker did not log ready within 900 s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(300)


def create_topics(bootstrap: str, names: list[str]) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.perf_counter()
    for i in range(0, len(names), BATCH):
        futures = admin.create_topics([NewTopic(n, QUEUES, 1) for n in names[i:i + BATCH]],
                                      request_timeout=300, operation_timeout=300)
        for f in futures.values():
            f.result(timeout=600)
    return time.perf_counter() - start


def settle(pid: int, busy_s: float = 0.05, interval: float = 0.5, bound: float = 300, group: bool = False) -> float:
    """Seconds until the broker's CPU stops moving (under ``busy_s`` over ``interval``), at
    most ``bound``: CreateTopics answers before the broker's segment preparer has made every
    new queue's first ConsumeQueue file, and that background work belongs to creation, not
    to whichever phase comes next."""
    start = time.perf_counter()
    last = cpu_seconds(pid, group)
    while time.perf_counter() - start < bound:
        time.sleep(interval)
        now = cpu_seconds(pid, group)
        if now - last < busy_s:
            break
        last = now
    return time.perf_counter() - start


def _produce_slice(bootstrap: str, names: list[str]) -> tuple[int, list[str]]:
    """One producer process's share: (records left undelivered, the first errors)."""
    from confluent_kafka import Producer

    failed: list[str] = []
    # no message timeout: a client slowed by a loaded machine must not fail its own records
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1_000_000,
                         "metadata.max.age.ms": 600_000, "message.timeout.ms": 0})
    for name in names:
        for q in range(QUEUES):
            producer.produce(name, b"x" * 100, partition=q, on_delivery=lambda e, _m: e and failed.append(str(e)))
        producer.poll(0)
    left = producer.flush(900)
    return left + len(failed), failed[:3]


def produce_everywhere(bootstrap: str, names: list[str], producers: int) -> tuple[float, int, list[str]]:
    """One record into every queue from ``producers`` processes, each with its own slice of
    the topics: librdkafka's work per produce grows with the topics a client knows, so one
    client for 25,000 topics measures the client. Returns (seconds, records not
    delivered, the first errors)."""
    from concurrent.futures import ProcessPoolExecutor

    slices = [names[i::producers] for i in range(producers)]
    with ProcessPoolExecutor(producers) as pool:
        start = time.perf_counter()
        results = list(pool.map(_produce_slice, [bootstrap] * producers, slices))
        took = time.perf_counter() - start
    return took, sum(n for n, _ in results), [e for _, errors in results for e in errors][:3]


class _Conn:
    """One connection of the bench's own Kafka client, with the project's codec: requests
    encoded ahead of the clock where they can be, answered in order."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=600)
        self.sent = 0

    def frame(self, api_key: int, version: int, body: dict) -> bytes:
        from rocketport.protocols.kafka import codec

        payload = codec.encode_request_header(api_key, version, self.sent, "scale-bench") + b"".join(
            bytes(part) for part in codec.encode_request(api_key, version, body))
        self.sent += 1
        return struct.pack(">i", len(payload)) + payload

    def receive(self, api_key: int, version: int) -> dict:
        from rocketport.protocols.kafka import codec

        (size,) = struct.unpack(">i", self.sock.recv(4, socket.MSG_WAITALL))
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        _, pos = codec.decode_response_header(api_key, version, data)
        return codec.decode_response(api_key, version, memoryview(data)[pos:])

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.sock.sendall(self.frame(api_key, version, body))
        return self.receive(api_key, version)

    def pipelined(self, api_key: int, version: int, bodies: list[dict], answer, in_flight: int = 8) -> float:
        """``bodies`` encoded ahead of the clock, sent with ``in_flight`` pipelined;
        ``answer(decoded)`` for each response. Seconds from the first send to the last answer."""
        frames = [self.frame(api_key, version, body) for body in bodies]
        start = time.perf_counter()
        waiting = 0
        for frame in frames:
            if waiting >= in_flight:
                answer(self.receive(api_key, version))
                waiting -= 1
            self.sock.sendall(frame)
            waiting += 1
        for _ in range(waiting):
            answer(self.receive(api_key, version))
        return time.perf_counter() - start

    def close(self) -> None:
        self.sock.close()


def _pipelined(port: int, api_key: int, version: int, bodies: list[dict], answer, in_flight: int = 8) -> float:
    """The bench's own Kafka client on a connection of its own (:meth:`_Conn.pipelined`)."""
    conn = _Conn(port)
    try:
        return conn.pipelined(api_key, version, bodies, answer, in_flight)
    finally:
        conn.close()


def produce_raw(port: int, names: list[str], topics_per_request: int = 250) -> tuple[float, int, list[str]]:
    """One record into every queue of ``names`` with the bench's own client (Produce v9,
    ``topics_per_request`` topics a request, every queue of each, a one-record batch a
    queue): what the broker does when its client is not the bound (librdkafka's
    per-partition work grows with the partitions it knows). Returns (seconds, records
    refused, the first errors)."""
    from rocketport.common.batch import Record, build_batch

    batch = build_batch([Record(0, 0, None, b"x" * 100, [])], base_timestamp=int(time.time() * 1000))
    bodies = [{"acks": 1, "timeout_ms": 300_000, "topic_data": [
        {"name": name, "partition_data": [{"index": q, "records": batch} for q in range(QUEUES)]}
        for name in names[i:i + topics_per_request]]} for i in range(0, len(names), topics_per_request)]
    refused, errors = 0, []

    def answer(response: dict) -> None:
        nonlocal refused
        for topic in response["responses"]:
            for part in topic["partition_responses"]:
                if part["error_code"]:
                    refused += 1
                    if len(errors) < 3:
                        errors.append(f"{topic['name']}/{part['index']}: error {part['error_code']}")

    return _pipelined(port, 0, 9, bodies, answer), refused, errors


def fetch_raw(port: int, names: list[str], topics_per_request: int = 250) -> tuple[float, int]:
    """Every queue of ``names`` read from offset 0 with the bench's own client (Fetch v4,
    no wait): what the broker does for a reader of all queues whose client is not the
    bound. Returns (seconds, queues that returned records)."""
    bodies = [{"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20, "isolation_level": 0,
               "topics": [{"topic": name, "partitions": [{"partition": q, "fetch_offset": 0,
                                                         "partition_max_bytes": 1 << 20} for q in range(QUEUES)]}
                          for name in names[i:i + topics_per_request]]}
              for i in range(0, len(names), topics_per_request)]
    read = 0

    def answer(response: dict) -> None:
        nonlocal read
        read += sum(1 for topic in response["responses"] for part in topic["partitions"]
                    if not part["error_code"] and part["records"] is not None and len(part["records"]))

    return _pipelined(port, 1, 4, bodies, answer), read


def commit_raw(port: int, names: list[str], group: str = "scale-bench-raw",
               topics_per_request: int = 250) -> tuple[float, int]:
    """Offset 1 committed for every queue of ``names`` in ``group`` (OffsetCommit v2, no
    member: a group whose consumers manage their own assignment): each queue then holds a
    consumer's state, so the RSS after it gives a queue's cost with a consumer. Returns
    (seconds, partitions refused)."""
    bodies = [{"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
               "topics": [{"name": name, "partitions": [{"partition_index": q, "committed_offset": 1,
                                                        "committed_metadata": ""} for q in range(QUEUES)]}
                          for name in names[i:i + topics_per_request]]}
              for i in range(0, len(names), topics_per_request)]
    refused = 0

    def answer(response: dict) -> None:
        nonlocal refused
        refused += sum(1 for topic in response["topics"] for part in topic["partitions"] if part["error_code"])

    return _pipelined(port, 8, 2, bodies, answer), refused


# Kafka error codes the raw group member acts on
REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 27, 79
RAW_GROUP_SESSION_MS = 30_000  # librdkafka's default session timeout (heartbeats every 3 s)


def _subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    out = [struct.pack(">hi", 0, len(topics))]
    for topic in topics:
        name = topic.encode()
        out += [struct.pack(">h", len(name)), name]
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def _batches(records) -> tuple[int, int]:
    """(records, the offset after the last) of a Fetch partition's record batches (v2)."""
    data = bytes(records)
    count, after, pos = 0, -1, 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):  # a partial batch at the end of max bytes
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        (n,) = struct.unpack_from(">i", data, pos + 57)
        count, after, pos = count + n, base + last_delta + 1, pos + 12 + length
    return count, after


class _RawGroup:
    """What the members of the raw group share: the generation every member is in (set by
    the leader once its JoinGroup answer names them all) and their heartbeats' failures."""

    def __init__(self, members: int) -> None:
        self.members = members
        self.lock = threading.Lock()
        self.final_generation = -1
        self.joins = 0
        self.heartbeat_errors: list[int] = []


def _assign(conn: _Conn, members: list[dict]) -> list[dict]:
    """The leader's work: every member's subscription, the partition counts from Metadata,
    Kafka's range assignment (the project's RangeAssignor), one assignment each."""
    from rocketport.protocols.kafka.assignors import MemberSpec, RangeAssignor
    from rocketport.protocols.kafka.consumer_protocol import encode_assignment, parse_subscription

    subs = {m["member_id"]: parse_subscription(bytes(m["metadata"])) for m in members}
    wanted = {t for sub in subs.values() for t in sub.topics}
    md = conn.call(3, 4, {"topics": None, "allow_auto_topic_creation": False})
    partitions = {t["name"]: len(t["partitions"]) for t in md["topics"] if t["name"] in wanted and not t["error_code"]}
    specs = [MemberSpec(mid, None, frozenset(t for t in sub.topics if t in partitions), {})
             for mid, sub in subs.items()]
    plan = RangeAssignor().assign(specs, partitions)
    return [{"member_id": mid, "assignment": encode_assignment(plan.get(mid, {}), 0)} for mid in subs]


def _heartbeats(port: int, group_id: str, member: dict, shared: _RawGroup, stop: threading.Event) -> None:
    """A member's heartbeat every 3 s on a connection of its own, as a client's background
    thread sends them while its main thread reads (failures are counted, not acted on)."""
    conn = _Conn(port)
    try:
        while not stop.wait(3):
            code = conn.call(12, 3, {"group_id": group_id, "generation_id": member["generation"],
                                     "member_id": member["id"], "group_instance_id": None})["error_code"]
            if code:
                with shared.lock:
                    shared.heartbeat_errors.append(code)
    finally:
        conn.close()


def _raw_member(port: int, group_id: str, topics: list[str], shared: _RawGroup, out: dict,
                topics_per_request: int = 250) -> None:
    """One member of a classic consumer group, with the bench's own client: JoinGroup v5
    (protocol type "consumer", "range"), SyncGroup v3 (the leader assigns), rejoining
    while the group grows to ``shared.members``; then OffsetFetch v7 of its partitions,
    ListOffsets v1 (earliest) where nothing is committed, Fetch v4 from those offsets until
    every partition is at its high watermark, OffsetCommit v7 of what it read and
    LeaveGroup v3. ``out`` gets its figures."""
    from rocketport.protocols.kafka.consumer_protocol import parse_assignment

    conn = _Conn(port)
    start = time.perf_counter()
    member_id, metadata = "", _subscription(topics)
    while True:
        joined = conn.call(11, 5, {"group_id": group_id, "session_timeout_ms": RAW_GROUP_SESSION_MS,
                                   "rebalance_timeout_ms": 300_000, "member_id": member_id,
                                   "group_instance_id": None, "protocol_type": "consumer",
                                   "protocols": [{"name": "range", "metadata": metadata}]})
        member_id = joined["member_id"]
        if joined["error_code"] == MEMBER_ID_REQUIRED:
            continue
        if joined["error_code"]:
            raise RuntimeError(f"JoinGroup: error {joined['error_code']}")
        with shared.lock:
            shared.joins += 1
        generation, assignments = joined["generation_id"], []
        if joined["leader"] == member_id:
            assignments = _assign(conn, joined["members"])
            if len(joined["members"]) == shared.members:
                shared.final_generation = generation  # before SyncGroup: the others learn it after
        synced = conn.call(14, 3, {"group_id": group_id, "generation_id": generation, "member_id": member_id,
                                   "group_instance_id": None, "assignments": assignments})
        if synced["error_code"] == REBALANCE_IN_PROGRESS:
            continue
        if synced["error_code"]:
            raise RuntimeError(f"SyncGroup: error {synced['error_code']}")
        if generation == shared.final_generation:
            break
        while True:  # stable without every member yet: heartbeat until the rebalance that adds them
            time.sleep(0.1)
            code = conn.call(12, 3, {"group_id": group_id, "generation_id": generation, "member_id": member_id,
                                     "group_instance_id": None})["error_code"]
            if code == REBALANCE_IN_PROGRESS:
                break
            if code:
                raise RuntimeError(f"Heartbeat: error {code}")
    joined_s = time.perf_counter() - start
    member = {"id": member_id, "generation": generation}
    stop = threading.Event()
    beating = threading.Thread(target=_heartbeats, args=(port, group_id, member, shared, stop), daemon=True)
    beating.start()
    mine = sorted((t, p) for t, parts in parse_assignment(bytes(synced["assignment"])).items() for p in parts)

    def chunks(pairs: list[tuple[str, int]]) -> list[list[tuple[str, list[int]]]]:
        by_topic: dict[str, list[int]] = {}
        for t, p in pairs:
            by_topic.setdefault(t, []).append(p)
        items = list(by_topic.items())
        return [items[i:i + topics_per_request] for i in range(0, len(items), topics_per_request)]

    position: dict[tuple[str, int], int] = {}

    def fetched_offsets(response: dict) -> None:
        for t in response["topics"]:
            for p in t["partitions"]:
                if not p["error_code"] and p["committed_offset"] >= 0:
                    position[(t["name"], p["partition_index"])] = p["committed_offset"]

    asks = [{"group_id": group_id, "topics": [{"name": t, "partition_indexes": ps} for t, ps in chunk],
             "require_stable": False} for chunk in chunks(mine)]
    phases = {"offset_fetch_s": conn.pipelined(9, 7, asks, fetched_offsets)}

    def earliest(response: dict) -> None:
        for t in response["topics"]:
            for p in t["partitions"]:
                if not p["error_code"]:
                    position[(t["name"], p["partition_index"])] = p["offset"]

    unset = [tp for tp in mine if tp not in position]
    asks = [{"replica_id": -1, "topics": [{"name": t, "partitions": [{"partition_index": p, "timestamp": -2}
                                                                       for p in ps]} for t, ps in chunk]}
            for chunk in chunks(unset)]
    phases["list_offsets_s"] = conn.pipelined(2, 1, asks, earliest)
    read_records, queues_read, fetch_errors = 0, set(), 0
    phases["fetch_s"] = 0.0
    todo = [tp for tp in mine if tp in position]
    for _ in range(100):  # rounds: a partition stays in the next while short of its high watermark
        behind: list[tuple[str, int]] = []

        def got(response: dict) -> None:
            nonlocal read_records, fetch_errors
            for t in response["responses"]:
                for p in t["partitions"]:
                    tp = (t["topic"], p["partition_index"])
                    if p["error_code"]:
                        fetch_errors += 1
                        continue
                    n, after = _batches(p["records"] or b"")
                    if n:
                        read_records += n
                        queues_read.add(tp)
                        position[tp] = after
                    if position[tp] < p["high_watermark"]:
                        behind.append(tp)

        asks = [{"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20, "isolation_level": 0,
                 "topics": [{"topic": t, "partitions": [{"partition": p, "fetch_offset": position[(t, p)],
                                                         "partition_max_bytes": 1 << 20} for p in ps]}
                            for t, ps in chunk]} for chunk in chunks(todo)]
        phases["fetch_s"] += conn.pipelined(1, 4, asks, got)
        if not behind:
            break
        todo = behind
    refused = 0

    def committed(response: dict) -> None:
        nonlocal refused
        refused += sum(1 for t in response["topics"] for p in t["partitions"] if p["error_code"])

    asks = [{"group_id": group_id, "generation_id_or_member_epoch": generation, "member_id": member_id,
             "group_instance_id": None, "topics": [{"name": t, "partitions": [
                 {"partition_index": p, "committed_offset": position[(t, p)], "committed_leader_epoch": -1,
                  "committed_metadata": ""} for p in ps]} for t, ps in chunk]}
            for chunk in chunks([tp for tp in mine if tp in queues_read])]
    phases["commit_s"] = conn.pipelined(8, 7, asks, committed)
    stop.set()
    beating.join()
    phases["leave_s"] = time.perf_counter()
    left = conn.call(13, 3, {"group_id": group_id, "members": [{"member_id": member_id, "group_instance_id": None}]})
    phases["leave_s"] = time.perf_counter() - phases["leave_s"]
    conn.close()
    out.update(phases=phases, partitions=len(mine), queues_read=queues_read, records=read_records,
               fetch_errors=fetch_errors, commit_refused=refused, joined_s=joined_s,
               leave_error=left["error_code"] or max((m["error_code"] for m in left["members"]), default=0))


def group_read_raw(port: int, names: list[str], members: int, group_id: str = "scale-bench-raw-group") -> dict:
    """A classic consumer group of ``members`` members (threads of this process, each on its
    own connections) reading every queue of ``names`` back with the bench's own client
    (:func:`_raw_member`): what the broker does for a group whose client is not the bound.
    Returns the figures of the row."""
    shared = _RawGroup(members)
    outs: list[dict] = [{} for _ in range(members)]
    errors: list[str] = []

    def run(out: dict) -> None:
        try:
            _raw_member(port, group_id, names, shared, out)
        except Exception as exc:  # reported in the row, with what the others read
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(out,)) for out in outs]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - start
    done = [o for o in outs if o]
    queues_read: set[tuple[str, int]] = set().union(*(o["queues_read"] for o in done)) if done else set()
    return {"took": took, "members": members, "queues_read": len(queues_read),
            "records": sum(o["records"] for o in done),
            "assigned": sum(o["partitions"] for o in done), "joins": shared.joins,
            "join_sync_s": round(max((o["joined_s"] for o in done), default=0), 3),
            "fetch_errors": sum(o["fetch_errors"] for o in done),
            "commit_refused": sum(o["commit_refused"] for o in done),
            **({name: round(max(o["phases"][name] for o in done), 3) for name in done[0]["phases"]} if done else {}),
            "leave_errors": sum(1 for o in done if o["leave_error"]),
            "heartbeat_errors": shared.heartbeat_errors[:5], "errors": errors[:3]}


def member_patterns(members: int) -> list[str]:
    """Each group member's subscription: the topics whose number ends in its share of the
    ten digits. One regex for all would name every topic in each member's metadata, and a
    librdkafka leader drops a member whose metadata names more than 10,000 topics
    (rd_kafka_group_MemberMetadata_consumer_read): at 25,000 topics it assigned nothing."""
    if not 1 <= members <= 10:
        raise ValueError("1 to 10 group members")
    return [f"^scale-[0-9]*[{''.join(str(d) for d in range(i, 10, members))}]$" for i in range(members)]


def _consume_share(bootstrap: str, deadline: float, counts, slot: int, done, results, pattern: str) -> None:
    """One group member: the queues it read a record of (put on ``results``), read until
    ``done`` or the deadline (time.time()); its count goes to ``counts[slot]`` as it reads."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-bench", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 600_000})
    consumer.subscribe([pattern])
    seen: set[tuple[str, int]] = set()
    while not done.is_set() and time.time() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                seen.add((m.topic(), m.partition()))
        counts[slot] = len(seen)
    results.put(seen)  # first: a member with thousands of partitions may take minutes to close
    consumer.close()


def consume_all(bootstrap: str, total: int, deadline_s: float, members: int) -> tuple[float, int]:
    """A group of ``members`` processes reads every queue back (one record each); seconds
    until they have all been read (or the deadline), and how many were."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    counts, done, results = ctx.Array("i", members), ctx.Event(), ctx.Queue()
    deadline = time.time() + deadline_s
    procs = [ctx.Process(target=_consume_share, args=(bootstrap, deadline, counts, i, done, results, pattern))
             for i, pattern in enumerate(member_patterns(members))]
    start = time.perf_counter()
    for proc in procs:
        proc.start()
    while sum(counts) < total and time.time() < deadline:  # (a queue read twice in a rebalance
        time.sleep(0.2)                                    # counts twice: the union says)
    took = time.perf_counter() - start
    done.set()
    seen: set[tuple[str, int]] = set()
    for _ in procs:
        try:
            seen |= results.get(timeout=120)
        except queue.Empty:  # a member stuck in librdkafka: its count is not in the union
            break
    for proc in procs:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
    return took, len(seen)


def metadata_all(bootstrap: str) -> tuple[float, int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=60)  # connected first
    start = time.perf_counter()
    md = admin.list_topics(timeout=120)
    return time.perf_counter() - start, len(md.topics)


def topic_list(namesrv: int) -> tuple[float, int]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "rocketport", "admin", "topicList", "-n", f"127.0.0.1:{namesrv}"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    took = time.perf_counter() - start
    return took, sum(1 for line in out.stdout.splitlines() if "scale-" in line)


def declare_pipelined(url: str, names: list[str], channels: int = 8, window: int = 1000) -> None:
    """Declare every name as a durable queue with pika, pipelined: ``channels`` channels,
    each sending its share ``window`` at a time as nowait declares ended by one awaited
    declare (a channel handles its methods in order, so that answer covers the window).
    RabbitMQ gets many declares in flight, as Rocketport gets 1,000 topics a CreateTopics."""
    import pika

    shares = [names[i::channels] for i in range(channels)]
    state = {"open": channels, "error": None}

    def send(channel, share: list[str], pos: int) -> None:
        chunk = share[pos:pos + window]
        if not chunk:
            state["open"] -= 1
            if not state["open"]:
                connection.close()
            return
        for name in chunk[:-1]:
            channel.queue_declare(name, durable=True)  # no callback: nowait
        channel.queue_declare(chunk[-1], durable=True, callback=lambda _ok: send(channel, share, pos + window))

    def closed_early(_channel, reason) -> None:
        if state["open"]:
            state["error"] = str(reason)
            connection.close()

    def opened(conn) -> None:
        for share in shares:
            conn.channel(on_open_callback=lambda ch, share=share: (ch.add_on_close_callback(closed_early),
                                                                    send(ch, share, 0)))

    connection = pika.SelectConnection(pika.URLParameters(url), on_open_callback=opened,
                                       on_close_callback=lambda conn, _reason: conn.ioloop.stop())
    connection.ioloop.start()
    if state["open"] or state["error"]:
        raise RuntimeError(f"RabbitMQ declares did not all complete: {state['error'] or state['open']}")


def rabbitmq_rows(workdir: str, names: list[str]) -> dict[str, dict[str, object]]:
    """RabbitMQ (a private node) declaring as many durable queues, pipelined with pika, timed
    until its CPU stops moving as Rocketport's creation is; its RSS (the node's process
    group) before and after. Returns each row's figures, which Rocketport's rows carry as
    their peer."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peers import rabbitmq

    queue_names = [f"{name}-{q}" for name in names for q in range(QUEUES)]
    node = rabbitmq.start(free_port(), free_port(), os.path.join(workdir, "rabbitmq"))
    try:
        sampler = Sampler(node.pid, group=True)
        time.sleep(1)
        sampler.sample()
        base = sampler.last_rss
        cpu = Cpu(node.pid, group=True)
        start = time.perf_counter()
        declare_pipelined(node.url, queue_names)
        answered = time.perf_counter() - start
        took = answered + settle(node.pid, group=True)
        spent = cpu.spent()
        sampler.stop()
        queues = len(queue_names)
        listed = node.ctl("list_queues", "name", timeout=600).count("scale-")
        version = node.ctl("version").strip()
        peer = f"rabbitmq {version} (pika, pipelined declares)"
        declare = {"value": round(took, 3), "answered_s": round(answered, 3), "queues": queues, "listed": listed,
                   "per_s": round(queues / took), "peer": peer, "broker_cpu_s": spent["broker_cpu_s"]}
        memory = {"value": round(sampler.max_rss / 2**20, 1), "queues": queues, "peer": peer,
                  "bytes_per_queue": round((sampler.last_rss - base) / queues), "fds_max": sampler.max_fds}
        row("rabbitmq_declare_queues", took, "s", None, **{k: v for k, v in declare.items() if k != "value"})
        row("rabbitmq_rss_max", memory["value"], "MiB", None, **{k: v for k, v in memory.items() if k != "value"})
        return {"declare": declare, "memory": memory}
    finally:
        node.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=25_000)
    ap.add_argument("--skip-rabbitmq", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--producers", type=int, default=4,
                    help="producer processes sharing the topics, and consumer processes in the group")
    ap.add_argument("--consume-deadline", type=float, default=900,
                    help="seconds the group may take to read everything back (it reports how many it read)")
    ap.add_argument("--raw-first", action="store_true",
                    help="the bench's own pipelined client writes the first record into every queue "
                         "(confluent-kafka the second), not the other way round")
    ap.add_argument("--skip-group", action="store_true",
                    help="no confluent-kafka consumer group (its phase is the longest at 100,000 queues)")
    ap.add_argument("--raw-group-members", type=int, default=4,
                    help="members of the consumer group the bench's own client runs (row group_read_raw)")
    ap.add_argument("--only-raw-group", action="store_true",
                    help="create the topics, write a record into every queue with the bench's own client and "
                         "read them all back with its consumer group; nothing else (development)")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="scale-bench-", dir=args.dir)
    queues = args.topics * QUEUES
    names = [f"scale-{i}" for i in range(args.topics)]
    row("load", os.getloadavg()[0], "1-min load", None)
    # RabbitMQ first, on the same machine and disk, stopped before Rocketport starts: its rows
    # are the peer of Rocketport's creation and memory rows
    peer = {} if args.skip_rabbitmq else rabbitmq_rows(workdir, names)
    declare, memory = peer.get("declare", {}), peer.get("memory", {})
    broker = Broker(os.path.join(workdir, "store"))
    try:
        broker.start()
        assert broker.proc is not None
        sampler = Sampler(broker.proc.pid)
        base_rss = sampler.last_rss or 1
        bootstrap = f"127.0.0.1:{broker.kafka}"
        cpu = Cpu(broker.proc.pid)
        answered = create_topics(bootstrap, names)
        took = answered + settle(broker.proc.pid)  # the queues' background preparation included
        sampler.sample()
        idle_rss = sampler.last_rss
        row("create_queues", took, "s", 60, topics=args.topics, queues=queues, per_s=round(queues / took),
            answered_s=round(answered, 3), **cpu.spent(), peer=declare.get("peer"), peer_value=declare.get("value"),
            peer_answered_s=declare.get("answered_s"), peer_cpu_s=declare.get("broker_cpu_s"))

        def raw(case: str) -> None:
            took, refused, errors = produce_raw(broker.kafka, names)
            row(case, took, "s", 30, queues=queues, client="raw", refused=refused, errors=errors, **cpu.spent())

        def raw_group() -> None:
            figures = group_read_raw(broker.kafka, names, args.raw_group_members)
            row("group_read_raw", figures.pop("took"), "s", None, expected=queues, client="raw", **figures,
                **cpu.spent())

        if args.only_raw_group:
            raw("first_record_every_queue_raw")
            raw_group()
            broker.stop(signal.SIGTERM)
            return
        if args.raw_first:  # the broker's first write into every queue, with no client bound
            raw("first_record_every_queue_raw")
        took, undelivered, errors = produce_everywhere(bootstrap, names, args.producers)
        row("first_record_every_queue" if not args.raw_first else "second_record_every_queue", took, "s", 30,
            queues=queues, producers=args.producers, undelivered=undelivered, errors=errors, **cpu.spent())
        if not args.raw_first:
            raw("second_record_every_queue_raw")
        settle(broker.proc.pid)
        sampler.sample()
        written_rss = sampler.last_rss
        if not args.skip_group:
            took, seen = consume_all(bootstrap, queues, args.consume_deadline, args.producers)
            row("consume_group_all", took, "s", None, records=seen, expected=queues, members=args.producers,
                **cpu.spent())
        took, read = fetch_raw(broker.kafka, names)
        row("read_every_queue_raw", took, "s", None, queues_read=read, expected=queues, client="raw", **cpu.spent())
        took, refused = commit_raw(broker.kafka, names)
        row("commit_every_queue_raw", took, "s", None, queues=queues, refused=refused, client="raw", **cpu.spent())
        settle(broker.proc.pid)
        sampler.sample()
        consumed_rss = sampler.last_rss
        raw_group()  # after the memory sample: a queue's cost with one consumer group's offset
        took, n = metadata_all(bootstrap)
        row("kafka_metadata_all", took, "s", 2, topics=n)
        time.sleep(35)  # the broker registers with its name server every 30 s
        took, n = topic_list(broker.namesrv)
        row("admin_topic_list", took, "s", 2, topics=n)
        sampler.stop()
        row("broker_rss_max", sampler.max_rss / 2**20, "MiB", 1024, queues=queues,
            idle_bytes_per_queue=round((idle_rss - base_rss) / queues),
            written_bytes_per_queue=round((written_rss - base_rss) / queues),
            consumed_bytes_per_queue=round((consumed_rss - base_rss) / queues),
            peer=memory.get("peer"), peer_value=memory.get("value"),
            peer_bytes_per_queue=memory.get("bytes_per_queue"))
        row("consumer_bytes_per_queue", (consumed_rss - written_rss) / queues, "B", None, queues=queues,
            group=not args.skip_group, written_rss_mib=round(written_rss / 2**20), consumed_rss_mib=round(consumed_rss / 2**20))
        row("broker_fds_max", sampler.max_fds, "fds", 2000, queues=queues)
        broker.stop(signal.SIGTERM)
        row("clean_restart", broker.start(), "s", 15, queues=queues)
        broker.stop(signal.SIGKILL)
        row("sigkill_recovery", broker.start(), "s", 60, queues=queues)
        broker.stop(signal.SIGTERM)
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.proc.kill()
        broker.namesrv_proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
