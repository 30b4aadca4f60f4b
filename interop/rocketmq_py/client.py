"""Drive the PyPI `rocketmq` 0.4.4 client (C++ RocketMQ client 1.x) for the interop tests.

Run as a subprocess (the client is a C library: a crash must not take the caller down):
    python client.py produce NAMESRV TOPIC N [--mode sync|async|oneway|batch|orderly] [--tag T]
        [--key-prefix K] [--prop name=value ...]
    python client.py push NAMESRV TOPIC GROUP N [--expr EXPR] [--orderly]
        [--timeout S] [--show-prop NAME ...]
    python client.py pull NAMESRV TOPIC GROUP N [--expr EXPR] [--timeout S]
Every command takes --credentials ACCESS_KEY:SECRET_KEY (the client's ACL signing).
produce and push take --quiet (benchmarks): no line per message, one summary line instead,
{"messages": N, "seconds": S} timed from the first send / from the consumer's start.
Each line of stdout is one JSON object (a send result or a received message); the exit
status is 0 only when N messages were sent / received before the timeout. Never used by
the broker itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer


def _out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _credentials(client, args: argparse.Namespace) -> None:
    if args.credentials:
        access_key, _, secret_key = args.credentials.partition(":")
        client.set_session_credentials(access_key, secret_key, "")


def produce(args: argparse.Namespace) -> int:
    producer = Producer(f"PG_{args.topic}_{args.mode}")
    producer.set_namesrv_addr(args.namesrv)
    _credentials(producer, args)
    producer.start()
    try:
        messages = []
        for i in range(args.n):
            msg = Message(args.topic)
            msg.set_keys(f"{args.key_prefix}{i}")
            if args.tag:
                msg.set_tags(args.tag)
            for item in args.prop:
                name, _, value = item.partition("=")
                msg.set_property(name, value.replace("{i}", str(i)))
            body = f"{args.body_prefix}{i}"
            msg.set_body(body + "." * max(0, args.body_size - len(body)))
            messages.append(msg)
        if args.mode == "async":
            acked = threading.Semaphore(0)
            failures: list[str] = []

            def on_success(result) -> None:
                _out({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
                acked.release()

            def on_error(exc) -> None:
                failures.append(str(exc))
                acked.release()

            for msg in messages:
                producer.send_async(msg, on_success, on_error)
            for _ in messages:
                if not acked.acquire(timeout=30):
                    return 1
            return 1 if failures else 0
        if args.quiet:
            return _timed_sends(producer, messages, args)
        if args.mode == "batch":
            result = producer.send_batch(messages)
            _out({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
        else:
            for i, msg in enumerate(messages):
                if args.mode == "sync":
                    result = producer.send_sync(msg)
                elif args.mode == "orderly":
                    result = producer.send_orderly(msg, i % 3)
                else:
                    producer.send_oneway(msg)
                    _out({"sent": i})
                    continue
                _out({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
    finally:
        producer.shutdown()
    return 0


def _timed_sends(producer, messages: list, args: argparse.Namespace) -> int:
    """Send one at a time (sync) or in batches of --batch-size; one summary line."""
    start = time.perf_counter()
    if args.mode == "batch":
        for i in range(0, len(messages), args.batch_size):
            producer.send_batch(messages[i:i + args.batch_size])
    else:
        for msg in messages:
            producer.send_sync(msg)
    _out({"messages": len(messages), "seconds": time.perf_counter() - start})
    return 0


def push(args: argparse.Namespace) -> int:
    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    _credentials(consumer, args)
    received = 0
    done = threading.Event()
    lock = threading.Lock()

    def on_message(msg) -> None:
        nonlocal received
        with lock:
            received += 1
            if args.quiet:
                if received >= args.n:
                    done.set()
                return
            _out({"topic": msg.topic, "body": msg.body.decode().rstrip("."), "tags": (msg.tags or b"").decode(),
                  "keys": (msg.keys or b"").decode(), "queue_id": msg.queue_id,
                  "queue_offset": msg.queue_offset, "reconsume_times": msg.reconsume_times,
                  "born_timestamp": msg.born_timestamp,
                  "props": {name: (msg.get_property(name) or b"").decode() for name in args.show_prop}})
            if received >= args.n:
                done.set()

    consumer.subscribe(args.topic, on_message, args.expr)
    start = time.perf_counter()
    consumer.start()
    ok = done.wait(args.timeout)
    if args.quiet:
        _out({"messages": received, "seconds": time.perf_counter() - start})
    time.sleep(args.linger)
    consumer.shutdown()
    return 0 if ok else 1


def pull(args: argparse.Namespace) -> int:
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    _credentials(consumer, args)
    consumer.start()
    received = 0
    deadline = time.monotonic() + args.timeout
    try:
        while received < args.n and time.monotonic() < deadline:
            for msg in consumer.pull(args.topic, args.expr):
                received += 1
                _out({"topic": msg.topic, "body": msg.body.decode(), "queue_id": msg.queue_id,
                      "queue_offset": msg.queue_offset})
    finally:
        consumer.shutdown()
    return 0 if received >= args.n else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("namesrv")
    p.add_argument("topic")
    p.add_argument("n", type=int)
    p.add_argument("--mode", choices=("sync", "async", "oneway", "batch", "orderly"), default="sync")
    p.add_argument("--body-size", type=int, default=0, help="pad bodies to this many bytes")
    p.add_argument("--tag", default="")
    p.add_argument("--key-prefix", default="key-")
    p.add_argument("--body-prefix", default="body-")
    p.add_argument("--prop", action="append", default=[])
    p.add_argument("--batch-size", type=int, default=100, help="with --quiet --mode batch")
    c = sub.add_parser("push")
    c.add_argument("namesrv")
    c.add_argument("topic")
    c.add_argument("group")
    c.add_argument("n", type=int)
    c.add_argument("--expr", default="*")
    c.add_argument("--orderly", action="store_true")
    c.add_argument("--timeout", type=float, default=60)
    c.add_argument("--linger", type=float, default=1.0)
    c.add_argument("--show-prop", action="append", default=[], metavar="NAME",
                   help="print this user property of each message")
    q = sub.add_parser("pull")
    q.add_argument("namesrv")
    q.add_argument("topic")
    q.add_argument("group")
    q.add_argument("n", type=int)
    q.add_argument("--expr", default="*")
    q.add_argument("--timeout", type=float, default=60)
    for command in (p, c, q):
        command.add_argument("--credentials", default="", metavar="ACCESS_KEY:SECRET_KEY")
    for command in (p, c):
        command.add_argument("--quiet", action="store_true", help="one timing summary line")
    args = parser.parse_args()
    return {"produce": produce, "push": push, "pull": pull}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
