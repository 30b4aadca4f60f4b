"""What /metrics costs: raw Kafka produce and raw AMQP publish with the HTTP listener on
and scraped, beside the same with it off, in one run; and one scrape of a broker holding
10,000 queues (2,500 topics x 4), each with a group behind by one message.

Run: python bench/metrics_bench.py [--kafka-messages N] [--amqp-messages N] [--passes N]
     [--interval S] [--topics N] [--only traffic,scrape] [--cases kafka,amqp]

Two broker processes (uvloop, ASYNC_FLUSH, Kafka and AMQP on, temporary stores) run side by
side: ``on`` with the HTTP listener, scraped every ``--interval`` seconds (1 s: fifteen
times Prometheus' default rate) by a thread of this process while a case runs; ``off`` with
``http.enabled=false``. The per-protocol counters are always there (one addition per
request or delivery run), so ``off`` measures the listener, its scrapes and its event-loop
probe. Passes alternate which broker goes first. A row's value is the median over passes of
that pass's on/off msg/s (the two ran back to back, under the same load), beside the ratio
of the medians, msg/s (best and median pass) and the broker's CPU µs per message (median
pass) for both and their ratio: on a shared machine the CPU ratio is the steadier figure.
Floor 0.97x. ``--cases amqp`` runs one row.

The scrape row builds its broker in this process (a loop in a thread, the HTTP listener on
a free port): every queue holds one message and has a group whose committed offset is 0, so
each scrape computes 10,000 lags. Two rows: ``scrape_10000_queues``, nothing moved between
scrapes (what the collector saw last time is reused), and ``..._all_moved``, every committed
offset moved before each scrape (untimed), alternately to 1 (nothing behind) and back to 0,
so every lag is worked out again and every scrape at 0 reads 10,000 store timestamps (the
worst case of ``rocketmq_consumer_lag_latency``). Value: the median of ``--scrapes`` GETs,
ms, ceiling 100; with the CPU it took (this process: broker and client, ms a scrape), the
body's size, the scrape's peak Python allocation (tracemalloc, one scrape apart from the
timed ones), the RSS growth over all scrapes and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import amqp_bench  # noqa: E402
import kafka_bench  # noqa: E402
from procs import cpu_seconds, free_port, wait_for_port  # noqa: E402

FLOOR = 0.97
SCRAPE_CEILING_MS = 100.0


def emit(case: str, value: float, unit: str, floor: float | None = None, **extra: Any) -> None:
    print(json.dumps({"bench": "metrics", "case": case, "value": round(value, 3), "unit": unit,
                      "floor": floor, **extra}), flush=True)


# ---------------------------------------------------------------------- traffic on vs off
class Broker:
    def __init__(self, name: str, workdir: str, metrics: bool) -> None:
        self.name = name
        self.kafka, self.amqp = free_port(), free_port()
        self.http = free_port() if metrics else 0
        settings = [f"storePathRootDir={os.path.join(workdir, name)}", f"kafka.port={self.kafka}",
                    f"amqp.port={self.amqp}", "stomp.enabled=false", f"listenPort={free_port()}",
                    f"namesrv.port={free_port()}", "mappedFileSizeCommitLog=268435456",
                    f"defaultTopicQueueNums={kafka_bench.PARTITIONS}",
                    f"http.enabled={'true' if metrics else 'false'}", f"http.port={self.http}"]
        self.log = open(os.path.join(workdir, f"{name}.log"), "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "rocketport", "broker",
                                      *(arg for s in settings for arg in ("--set", s))],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        for port in (self.kafka, self.amqp, *((self.http,) if metrics else ())):
            wait_for_port(port, self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()


class Scraper:
    """GETs /metrics every ``interval`` seconds while running (a Prometheus stand-in)."""

    def __init__(self, port: int, interval: float) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Scraper":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while True:  # at once, then every interval: a short pass is scraped too
            with urllib.request.urlopen(self.url, timeout=30) as answer:
                answer.read()
            self.scrapes += 1
            if self._stop.wait(self.interval):
                return


def _run_case(broker: Broker, case: str, messages: int, interval: float) -> tuple[float, float, int]:
    """(msg/s, broker CPU µs per message, scrapes) of one pass."""
    scraper = Scraper(broker.http, interval) if broker.http else None
    kafka_bench.wait_idle(broker.proc.pid)
    cpu = cpu_seconds(broker.proc.pid)
    if scraper is not None:
        scraper.__enter__()
    try:
        if case == "kafka_produce_100B_raw":
            elapsed = asyncio.run(kafka_bench.raw_produce(broker.kafka, "metrics-bench", 100, messages))
        else:
            elapsed = asyncio.run(amqp_bench.raw_publish(broker.amqp, messages, 100))
    finally:
        if scraper is not None:
            scraper.__exit__()
    kafka_bench.wait_idle(broker.proc.pid)  # work the pass left (the index) is the pass's
    used = cpu_seconds(broker.proc.pid) - cpu
    return messages / elapsed, used * 1e6 / messages, scraper.scrapes if scraper is not None else 0


def traffic_rows(args: argparse.Namespace, workdir: str) -> None:
    on, off = Broker("on", workdir, True), Broker("off", workdir, False)
    try:
        for broker in (on, off):
            asyncio.run(kafka_bench.create_topic(broker.kafka, "metrics-bench"))
            amqp_bench.reset_queue(broker.amqp)
        cases = {"kafka": ("kafka_produce_100B_raw", args.kafka_messages),
                 "amqp": ("amqp_publish_100B_raw", args.amqp_messages)}
        for case, messages in (cases[name] for name in args.cases.split(",")):
            runs: dict[str, list[tuple[float, float, int]]] = {"on": [], "off": []}
            for n in range(args.passes):
                for broker in ((on, off) if n % 2 == 0 else (off, on)):
                    runs[broker.name].append(_run_case(broker, case, messages, args.interval))
            rate_on = [r[0] for r in runs["on"]]
            rate_off = [r[0] for r in runs["off"]]
            cpu_on = statistics.median(r[1] for r in runs["on"])
            cpu_off = statistics.median(r[1] for r in runs["off"])
            # each pass's on and off ran back to back: their ratio sees the same load, and
            # the median of those ratios is the row's value (the load drifts between passes)
            pairs = [a[0] / b[0] for a, b in zip(runs["on"], runs["off"])]
            emit(f"{case}_metrics_on_vs_off", statistics.median(pairs), "x", FLOOR,
                 ratio_of_medians=round(statistics.median(rate_on) / statistics.median(rate_off), 3),
                 pass_ratios=[round(r, 3) for r in pairs], load=_load(),
                 on_msgs_per_s=round(max(rate_on)), off_msgs_per_s=round(max(rate_off)),
                 on_median=round(statistics.median(rate_on)), off_median=round(statistics.median(rate_off)),
                 on_cpu_us_per_msg=round(cpu_on, 3), off_cpu_us_per_msg=round(cpu_off, 3),
                 cpu_ratio_off_over_on=round(cpu_off / cpu_on, 3),
                 scrapes=sum(r[2] for r in runs["on"]), interval_s=args.interval, passes=args.passes,
                 messages=messages, runs_on=[round(r) for r in rate_on], runs_off=[round(r) for r in rate_off])
    finally:
        on.stop()
        off.stop()


# ---------------------------------------------------------------------- one large scrape
def scrape_row(args: argparse.Namespace, workdir: str) -> None:
    import uvloop

    from rocketport.common.message import Message
    from rocketport.core.config import BrokerConfig, ProtocolConfig
    from rocketport.server import BrokerServer

    queues_per_topic = 4
    config = BrokerConfig(store_path_root_dir=os.path.join(workdir, "scrape"), listen_port=0,
                          mapped_file_size_commit_log=64 << 20, default_topic_queue_nums=queues_per_topic,
                          namesrv=ProtocolConfig(False, 0), kafka=ProtocolConfig(False, 0),
                          stomp=ProtocolConfig(False, 0), amqp=ProtocolConfig(False, 0),
                          http=ProtocolConfig(True, 0))
    loop = uvloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Any, timeout: float = 600) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def build() -> BrokerServer:
        server = BrokerServer(config)
        await server.start()
        broker = server.broker
        for t in range(args.topics):
            topic = f"scrape-topic-{t}"
            broker.create_topic(topic)
            await broker.store.queues_prepared()
            for q in range(queues_per_topic):
                await broker.put_message(Message(topic, b"x" * 100, {}, queue_id=q))
                broker.commit_offset(f"scrape-group-{t}", topic, q, 0)
        return server

    server = call(build())
    try:
        port = next(port for role, _, port in server.front_ends["http"].endpoints())
        url = f"http://127.0.0.1:{port}/metrics"
        time.sleep(1.0)  # the index and dispatch settle

        def scrape() -> int:
            with urllib.request.urlopen(url, timeout=60) as answer:
                return len(answer.read())
        size = scrape()  # warm
        rss_before = _rss()

        async def move(n: int) -> None:  # every commit moves (1: nothing behind, 0: one each)
            for t in range(args.topics):
                for q in range(queues_per_topic):
                    server.broker.commit_offset(f"scrape-group-{t}", f"scrape-topic-{t}", q, n % 2)

        rows = []
        for case, moved in (("", False), ("_all_moved", True)):
            timings: list[float] = []
            cpu = 0.0
            for n in range(args.scrapes):
                if moved:
                    call(move(n + 1))
                started, cpu_started = time.perf_counter(), time.process_time()
                scrape()
                timings.append((time.perf_counter() - started) * 1000)
                cpu += time.process_time() - cpu_started
            rows.append((case, timings, cpu * 1000 / args.scrapes))
        call(move(0))
        rss_after = _rss()

        async def traced() -> int:
            tracemalloc.start()
            front_end = server.front_ends["http"]
            from rocketport.protocols.http.text_format import render
            render(front_end.registry)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            return peak
        peak = call(traced())
        for case, timings, cpu_ms in rows:
            emit(f"scrape_{args.topics * queues_per_topic}_queues{case}", statistics.median(timings), "ms",
                 None, ceiling=SCRAPE_CEILING_MS, max_ms=round(max(timings), 1), cpu_ms=round(cpu_ms, 1),
                 scrapes=args.scrapes, topics=args.topics, queues=args.topics * queues_per_topic,
                 groups=args.topics, body_bytes=size, peak_alloc_mib=round(peak / 2**20, 1),
                 rss_growth_mib=round((rss_after - rss_before) / 2**20, 1), rss_mib=round(rss_after / 2**20, 1),
                 load=_load())
    finally:
        call(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kafka-messages", type=int, default=2_000_000)
    parser.add_argument("--amqp-messages", type=int, default=1_000_000)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--topics", type=int, default=2500)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--only", default="traffic,scrape")
    parser.add_argument("--cases", default="kafka,amqp", help="the traffic rows: kafka, amqp")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        if "traffic" in only:
            traffic_rows(args, workdir)
        if "scrape" in only:
            scrape_row(args, workdir)


if __name__ == "__main__":
    main()
