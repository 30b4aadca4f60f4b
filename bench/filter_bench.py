"""Messaging-semantics throughput: filtered pulls, the delay path and the retry path.

Prints one JSON object per measurement. Usage:
    python bench/filter_bench.py [--quick] [--profile]
Cases:
- tag_10pct: Broker.pull with a tag filter matching 10% of a queue, in ConsumeQueue entries
  scanned per second (tagsCode prefilter, exact tag check on the matches);
- sql_10pct: the same with a SQL92 filter (``n < 10`` over n = 0..99), in messages
  evaluated per second (every entry needs its properties read);
- delay_put / delay_deliver: puts all due at one instant (TIMER_DELIVER_MS, 3 s ahead) into
  SCHEDULE_TOPIC_XXXX, then the schedule service moving them to the real topic: delivered
  messages per second from the due instant to the last delivery;
- retry_send_back / retry_deliver: send-backs of consumed messages (delay level 3 = 3 s),
  then their delivery to %RETRY%{group}, from the first delivery to the last. Messages fall
  due as fast as they were sent back, so this is min(delivery capacity, send-back rate).
``--profile`` prints a cProfile summary (to stderr) for every case that misses its floor.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time

from rocketport.common.message import Message
from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig
from rocketport.core.filter import compile_filter

FLOORS = {"tag_10pct": 1_000_000, "sql_10pct": 300_000, "delay_put": 20_000,
          "delay_deliver": 20_000, "retry_send_back": 20_000, "retry_deliver": 20_000}
UNITS = {"tag_10pct": "scanned/s", "sql_10pct": "evaluated/s"}


def emit(case: str, value: float, **extra) -> None:
    row = {"bench": "filter", "case": case, "value": round(value, 1),
           "unit": UNITS.get(case, "msg/s"), "floor": FLOORS[case]}
    row.update(extra)
    print(json.dumps(row), flush=True)


def _config(root: str) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 << 20,
                        message_index_enable=False, message_delay_level="1s 2s 3s")


async def _fill_filter_queue(broker: Broker, n: int) -> None:
    broker.create_topic("F", read_queue_nums=1, write_queue_nums=1)
    body = b"x" * 100
    for i in range(n):
        props = {"TAGS": "A" if i % 10 == 0 else "B", "n": str(i % 100)}
        await broker.put_message(Message("F", body, props, queue_id=0))


async def _scan(broker: Broker, expression_type: str, expression: str, n: int) -> tuple[float, int]:
    flt = compile_filter(expression_type, expression)
    offset = matched = 0
    t = time.perf_counter()
    while offset < n:
        r = await broker.pull("bench", "F", 0, offset, 32, message_filter=flt)
        matched += r.message_count
        offset = r.next_begin_offset
    return n / (time.perf_counter() - t), matched


async def _wait_for(broker: Broker, topic: str, n: int, timeout_s: float) -> float:
    """perf_counter time at which ``topic`` queue 0 holds ``n`` messages."""
    deadline = time.monotonic() + timeout_s
    while broker.max_offset(topic, 0) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {broker.max_offset(topic, 0)} of {n} delivered to {topic}")
        await broker.wait_for_messages([(topic, 0, broker.max_offset(topic, 0))], 0.5)
    return time.perf_counter()


async def _delay(broker: Broker, n: int) -> dict[str, float]:
    broker.create_topic("D", read_queue_nums=1, write_queue_nums=1)
    body = b"x" * 100
    due_ms = int(time.time() * 1000) + 3000
    props = {"TIMER_DELIVER_MS": str(due_ms)}
    t = time.perf_counter()
    for _ in range(n):
        await broker.put_message(Message("D", body, dict(props), queue_id=0))
    put_rate = n / (time.perf_counter() - t)
    if time.time() * 1000 >= due_ms:
        raise RuntimeError("the puts took longer than the delay: lower the message count")
    due = time.perf_counter() + (due_ms / 1000 - time.time())
    done = await _wait_for(broker, "D", n, 60)
    return {"delay_put": put_rate, "delay_deliver": n / (done - due)}


async def _retry(broker: Broker, n: int) -> dict[str, float]:
    broker.create_topic("R", read_queue_nums=1, write_queue_nums=1)
    offsets = [(await broker.put_message(Message("R", b"x" * 100, queue_id=0))).commit_log_offset
               for _ in range(n)]
    t = time.perf_counter()
    for offset in offsets:
        await broker.send_back("G", offset, delay_level=3)
    rate = n / (time.perf_counter() - t)
    await _wait_for(broker, "%RETRY%G", 1, 30)
    first = time.perf_counter()
    done = await _wait_for(broker, "%RETRY%G", n, 60)
    return {"retry_send_back": rate, "retry_deliver": (n - 1) / max(done - first, 1e-9)}


def _profiled(coro_factory, profile: bool):
    """Run one case, with cProfile around it when asked."""
    if not profile:
        return asyncio.run(coro_factory())
    prof = cProfile.Profile()
    prof.enable()
    try:
        return asyncio.run(coro_factory())
    finally:
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
        sys.stderr.write(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller runs (for CI)")
    ap.add_argument("--profile", action="store_true", help="cProfile every case (stderr)")
    args = ap.parse_args()
    n_filter = 50_000 if args.quick else 200_000
    n_delay = 10_000 if args.quick else 50_000

    with tempfile.TemporaryDirectory() as root:
        async def filters():
            async with Broker(_config(root)) as broker:
                await _fill_filter_queue(broker, n_filter)
                # best of three: the machine is shared, a run can lose the core midway
                tag = max([await _scan(broker, "TAG", "A", n_filter) for _ in range(3)])
                sql = max([await _scan(broker, "SQL92", "n < 10", n_filter) for _ in range(3)])
                return tag, sql

        (tag_rate, tag_matched), (sql_rate, sql_matched) = asyncio.run(filters())
        emit("tag_10pct", tag_rate, messages=n_filter, matched=tag_matched)
        emit("sql_10pct", sql_rate, messages=n_filter, matched=sql_matched)

    for name, case in (("delay", _delay), ("retry", _retry)):
        with tempfile.TemporaryDirectory() as root:
            async def run_case(case=case, root=root):
                async with Broker(_config(root)) as broker:
                    return await case(broker, n_delay)

            for key, value in _profiled(run_case, args.profile).items():
                emit(key, value, messages=n_delay)


if __name__ == "__main__":
    main()
