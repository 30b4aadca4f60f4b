"""SIGKILL durability soak: acknowledged messages survive a broker killed at random moments,
and the clients that were producing survive it too.

Run: python bench/crash_soak.py [--cycles N] [--seed S] [--dir DIR] [--set KEY=VALUE ...]
     python bench/crash_soak.py --cycles 1 --sabotage   (the checker's own check: exits 1)

Starts a real broker process (`python -m rocketport broker`, SYNC_FLUSH, a temporary store,
loopback ports chosen once: every restart listens on the same ones) and repeats N cycles of:

1. produce continuously over every protocol, every send acknowledged and unique:
   - ``kafka``: Produce with acks=all (a raw client, several requests in flight per
     connection, 1-8 records a batch, no producer id);
   - ``remoting``: SEND_MESSAGE_V2 sync sends (several in flight per connection);
   - ``stomp``: SEND frames with a receipt header (raw frames, several in flight);
   - ``amqp``: publishes on a confirm channel (aio-pika, several in flight) to a fanout
     exchange;
   - ``kafka_idempotent``: one confluent-kafka producer with enable.idempotence and
     acks=all that lives through every cycle (never restarted unless it dies: each death
     is a fatal error);
   - ``kafka_transactional``: one confluent-kafka transactional producer that lives through
     every cycle, transactions of 8 records back to back (a failed commit is retried while
     it is retriable, the transaction aborted when the client must);
   a payload counts as acknowledged once its success response (receipt, confirm, delivery
   report, committed transaction) was read; the raw clients' connections die with the
   broker and new ones start in the next cycle;
2. SIGKILL the broker at a random moment (--min-run..--max-run seconds in);
3. restart it on the same store and ports; let the two confluent producers finish what they
   hold (flush; the transaction in hand committed or aborted), then read everything back
   (Kafka Fetch from offset 0 of every partition, read_committed for the transactional
   topic; remoting PULL_MESSAGE from offset 0 of every queue for the remoting, STOMP and
   AMQP topics) and check: every payload ever acknowledged is there; nothing is there that
   was never sent (a torn or corrupt record served), nor a record of an aborted
   transaction, nor part of a transaction; offsets are dense. Duplicates are counted (the
   raw clients never retry, so a duplicate would be the broker's; the confluent producers
   do retry, and the broker must recognise what it already stored).

The next cycle produces to the restarted broker; each check covers every earlier cycle.
Prints one JSON object per measurement and line, e.g.
    {"bench": "crash_soak", "case": "acked_lost_kafka", "value": 0, "unit": "count", "floor": 0, ...}
for acked_lost_*, duplicates_* and cycles_* of every protocol, and fatal_errors_* of the two
confluent producers, with the totals (acked, read, unacknowledged sends found stored,
corrupt, offset gaps, transactions) beside each. Progress goes to stderr. Exits 1 if an
acknowledged message was lost, a corrupt one served, a producer died or the broker stored
a retry twice; 2 if the broker could not be started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import aiormq
from soak_clients import (
    QUEUES,
    TXN_RECORDS,
    ConfluentProducer,
    Ledger,
    amqp_producer,
    create_topics,
    kafka_producer,
    kafka_read_all,
    remoting_producer,
    remoting_read_all,
    stomp_producer,
)

from rocketport.protocols.remoting.client import RemotingClientError

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.support
from tests.support.remoting import free_port  # noqa: E402  (below the ephemeral range: restarts find it free)

KAFKA_TOPIC = "soak_kafka"
REMOTING_TOPIC = "soak_remoting"
STOMP_TOPIC = "soak_stomp"
AMQP_EXCHANGE = "soak_amqp"  # a topic of one queue, as every exchange
IDEMPOTENT_TOPIC = "soak_kafka_idempotent"
TRANSACTIONAL_TOPIC = "soak_kafka_transactional"
PROTOCOLS = ("kafka", "remoting", "stomp", "amqp", "kafka_idempotent", "kafka_transactional")
CONFLUENT = ("kafka_idempotent", "kafka_transactional")
CONNECTIONS = 2  # per raw protocol
START_TIMEOUT_S = 60
READ_TIMEOUT_S = 120
SABOTAGE_BYTES = 64 * 1024  # what --sabotage zeroes at the CommitLog's end
# how a raw producer's connection ends when the broker dies
_CONNECTION_ENDED = (OSError, asyncio.IncompleteReadError, RemotingClientError, asyncio.TimeoutError,
                     aiormq.exceptions.AMQPError)


def emit(case: str, value: int, **extra: Any) -> None:
    print(json.dumps({"bench": "crash_soak", "case": case, "value": value, "unit": "count", "floor": 0,
                      **extra}), flush=True)


def note(text: str) -> None:
    print(f"crash_soak: {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the broker process
class Broker:
    """One store, one broker process at a time, on loopback ports chosen at the first start
    (a broker given port 0 does not say outside which port it got) and kept: the confluent
    producers reconnect to the same address after every restart."""

    def __init__(self, store: str, log_path: str, settings: list[str]) -> None:
        self.store = store
        self.log_path = log_path
        self.settings = settings
        self.proc: subprocess.Popen | None = None
        self.ports: dict[str, int] = {}

    def start(self) -> None:
        first = not self.ports
        for _ in range(3 if first else 1):  # a port taken between choosing and binding: choose again
            if first:
                self.ports = {name: free_port() for name in ("kafka", "remoting", "stomp", "amqp")}
            args = [sys.executable, "-m", "rocketport", "broker",
                    "--set", f"storePathRootDir={self.store}",
                    "--set", "flushDiskType=SYNC_FLUSH",
                    "--set", f"listenPort={self.ports['remoting']}",
                    "--set", f"kafka.port={self.ports['kafka']}",
                    "--set", f"stomp.port={self.ports['stomp']}", "--set", "stomp.wsPort=0",
                    "--set", f"amqp.port={self.ports['amqp']}",
                    "--set", "namesrv.port=0", "--set", "http.port=0",
                    # small segments: CommitLog and ConsumeQueue rolls happen during the soak
                    "--set", "mappedFileSizeCommitLog=4194304",
                    "--set", "mappedFileSizeConsumeQueue=40960",
                    "--set", f"defaultTopicQueueNums={QUEUES}",
                    *(arg for s in self.settings for arg in ("--set", s))]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
            if self._wait_listening():
                return
            self.proc.kill()
            self.proc.wait(30)
        with open(self.log_path, "rb") as log:  # the work directory may not outlive the run
            tail = log.read()[-2000:].decode("utf-8", "replace")
        raise RuntimeError(f"the broker did not start; the end of {self.log_path}:\n{tail}")

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = set(self.ports.values())
        while pending and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            for port in list(pending):
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    pending.discard(port)
            if pending:
                time.sleep(0.05)
        return not pending

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


# ------------------------------------------------------------------ cycles
async def produce_then_kill(broker: Broker, cycle: int, ledgers: dict[str, Ledger],
                            run_s: float, rng: random.Random) -> None:
    """The raw producers of one cycle against the running broker, killed after ``run_s``
    (the confluent producers run on in their threads)."""
    ports = broker.ports
    producers = []
    for c in range(CONNECTIONS):
        producers += [
            kafka_producer(ports["kafka"], KAFKA_TOPIC, b"k|%d|%d" % (cycle, c), ledgers["kafka"],
                           random.Random(rng.random())),
            remoting_producer(ports["remoting"], REMOTING_TOPIC, b"r|%d|%d" % (cycle, c), ledgers["remoting"]),
            stomp_producer(ports["stomp"], STOMP_TOPIC, b"s|%d|%d" % (cycle, c), ledgers["stomp"]),
            amqp_producer(ports["amqp"], AMQP_EXCHANGE, b"a|%d|%d" % (cycle, c), ledgers["amqp"])]
    tasks = [asyncio.ensure_future(p) for p in producers]
    await asyncio.sleep(run_s)
    for task in tasks:
        if task.done():
            raise RuntimeError(f"a producer stopped before the kill: {task.exception()!r}")
    broker.kill()  # the moment: whatever responses were read by now are acknowledged
    done, alive = await asyncio.wait(tasks, timeout=30)
    for task in alive:
        task.cancel()
    for task in done:
        exc = task.exception()
        if exc is not None and not isinstance(exc, _CONNECTION_ENDED):
            raise exc


def sabotage(store: str) -> None:
    """Zero the last 64 KiB written to the CommitLog, as a disk that lost acknowledged writes
    would: a check of the checker (--sabotage), which must then report losses. (The last
    4 KiB could hold only writes whose answers a loaded client had not read yet.)"""
    directory = os.path.join(store, "commitlog")
    for name in sorted((n for n in os.listdir(directory) if n.isdigit()), reverse=True):
        with open(os.path.join(directory, name), "r+b") as f:  # the newest with data: the
            data = f.read()                                  # next may be made ahead, empty
            end = len(data.rstrip(b"\0"))
            if end:
                f.seek(max(0, end - SABOTAGE_BYTES))
                f.write(bytes(end - max(0, end - SABOTAGE_BYTES)))
                return


def check(ledger: Ledger, seen: Counter) -> None:
    read = set(seen)
    ledger.read = sum(seen.values())
    ledger.lost |= ledger.acked - read
    ledger.duplicates = max(ledger.duplicates, sum(n - 1 for n in seen.values() if n > 1))
    ledger.corrupt += len(read - ledger.sent)
    ledger.unacked_found = len((read & ledger.sent) - ledger.acked)
    ledger.cycles += 1


def check_transactions(ledger: Ledger, seen: Counter) -> None:
    """What read_committed shows of the transactions: none of an aborted one, each one
    whole or not at all (a transaction whose outcome the client never learnt may be either)."""
    for values in ledger.aborted:
        ledger.corrupt += sum(1 for v in values if seen[v])
    by_txn = Counter(v.rsplit(b"|", 1)[0] for v in seen)
    ledger.corrupt += sum(1 for n in by_txn.values() if n != TXN_RECORDS)


async def read_back(broker: Broker, ledgers: dict[str, Ledger]) -> None:
    ports = broker.ports
    reads = {
        "kafka": kafka_read_all(ports["kafka"], KAFKA_TOPIC, ledgers["kafka"]),
        "kafka_idempotent": kafka_read_all(ports["kafka"], IDEMPOTENT_TOPIC, ledgers["kafka_idempotent"]),
        "kafka_transactional": kafka_read_all(ports["kafka"], TRANSACTIONAL_TOPIC, ledgers["kafka_transactional"],
                                              committed=True),
        "remoting": remoting_read_all(ports["remoting"], REMOTING_TOPIC, QUEUES, ledgers["remoting"]),
        "stomp": remoting_read_all(ports["remoting"], STOMP_TOPIC, QUEUES, ledgers["stomp"]),
        "amqp": remoting_read_all(ports["remoting"], AMQP_EXCHANGE, 1, ledgers["amqp"]),
    }
    for name, read in reads.items():
        seen = await asyncio.wait_for(read, READ_TIMEOUT_S)
        check(ledgers[name], seen)
        if name == "kafka_transactional":
            check_transactions(ledgers[name], seen)


def _quiet_lost_connection(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Drops one known harmless report: when a send's write fails because the broker died,
    RemotingClient.invoke leaves that request's future, already failed by the reader with
    the same error, unread ("Future exception was never retrieved")."""
    if isinstance(context.get("exception"), RemotingClientError) and \
            "never retrieved" in context.get("message", ""):
        return
    loop.default_exception_handler(context)


async def soak(args: argparse.Namespace) -> dict[str, Ledger]:
    asyncio.get_running_loop().set_exception_handler(_quiet_lost_connection)
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)  # each kill's lost connection, with a traceback
    rng = random.Random(args.seed)
    root = tempfile.mkdtemp(prefix="crash-soak-", dir=args.dir)
    store = os.path.join(root, "store")
    broker = Broker(store, os.path.join(root, "broker.log"), args.set)
    ledgers = {name: Ledger() for name in PROTOCOLS}
    confluent: list[ConfluentProducer] = []
    try:
        broker.start()
        await create_topics(broker.ports["kafka"], [KAFKA_TOPIC, REMOTING_TOPIC, STOMP_TOPIC,
                                                     IDEMPOTENT_TOPIC, TRANSACTIONAL_TOPIC])
        bootstrap = f"127.0.0.1:{broker.ports['kafka']}"
        confluent = [ConfluentProducer(bootstrap, IDEMPOTENT_TOPIC, ledgers["kafka_idempotent"], transactional=False),
                     ConfluentProducer(bootstrap, TRANSACTIONAL_TOPIC, ledgers["kafka_transactional"],
                                       transactional=True)]
        for producer in confluent:
            producer.start()
        for cycle in range(args.cycles):
            run_s = rng.uniform(args.min_run, args.max_run)
            await produce_then_kill(broker, cycle, ledgers, run_s, rng)
            if args.sabotage:
                sabotage(store)
            started = time.monotonic()
            broker.start()
            restart_s = time.monotonic() - started
            for producer in confluent:  # what they hold goes to the restarted broker first
                await asyncio.to_thread(producer.pause)
            for producer in confluent:
                if producer.error is not None:
                    raise RuntimeError(f"{producer.name} failed: {producer.error!r}")
            await read_back(broker, ledgers)
            if cycle + 1 < args.cycles:  # after the last check nothing more is produced
                for producer in confluent:
                    producer.resume()
            note(f"cycle {cycle + 1}/{args.cycles}: killed after {run_s:.2f} s, restarted in "
                 f"{restart_s:.2f} s; " + "; ".join(
                     f"{name} acked {len(l.acked)} read {l.read} lost {len(l.lost)}"
                     for name, l in ledgers.items()))
    finally:
        try:
            for producer in confluent:
                if producer.is_alive():
                    await asyncio.to_thread(producer.stop)
        finally:  # the broker never outlives the soak
            broker.stop()
        if args.keep or any(failed(l) for l in ledgers.values()):
            note(f"store and broker log kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return ledgers


def failed(ledger: Ledger) -> bool:
    return bool(ledger.lost or ledger.corrupt or ledger.fatal_errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3, help="kill/restart cycles (default 3)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (kill moments, batch sizes)")
    parser.add_argument("--min-run", type=float, default=0.3, help="least seconds of producing before a kill")
    parser.add_argument("--max-run", type=float, default=2.0, help="most seconds of producing before a kill")
    parser.add_argument("--dir", default=None, help="where the temporary store goes")
    parser.add_argument("--keep", action="store_true", help="keep the store and broker log")
    parser.add_argument("--sabotage", action="store_true",
                        help="zero the CommitLog's last 64 KiB after each kill: checks that the "
                             "soak reports losses (it must exit 1)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another broker setting (repeatable)")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    note(f"seed {args.seed}")
    try:
        ledgers = asyncio.run(soak(args))
    except RuntimeError as exc:
        note(str(exc))
        return 2
    for name, ledger in ledgers.items():
        totals = {"acked": len(ledger.acked), "read": ledger.read, "corrupt": ledger.corrupt,
                  "offset_gaps": ledger.gaps, "unacked_found": ledger.unacked_found,
                  "seed": args.seed}
        if name == "kafka_transactional":
            totals.update(committed_txns=len(ledger.committed), aborted_txns=len(ledger.aborted))
        emit(f"acked_lost_{name}", len(ledger.lost), **totals)
        emit(f"duplicates_{name}", ledger.duplicates, **totals)
        if name in CONFLUENT:
            emit(f"fatal_errors_{name}", ledger.fatal_errors, **totals)
        emit(f"cycles_{name}", ledger.cycles, **totals)
    confluent_duplicates = any(ledgers[name].duplicates for name in CONFLUENT)
    return 1 if any(failed(l) for l in ledgers.values()) or confluent_duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
