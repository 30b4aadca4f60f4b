"""Driver for the PyPI `rocketmq` 0.4.4 client (the C++ RocketMQ client 1.x) in the interop
matrix: one JSON request on stdin, JSON lines out (see interop/clients/driver.py). A process
of its own because the client is a C library that can crash or hang its process.

The C++ client's API reads a message's properties by name only, so deliveries show the
properties named in PROPS (the ones the scenarios set).
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
import zlib

from rocketmq.client import Message, Producer, PushConsumer

PROPS = ("color", "seq", "n")
DELAY_LEVEL = {3: 2}  # seconds -> level (interop/broker.py DELAY_LEVELS: level 2 is 3 s)


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def credentials(client, req: dict) -> None:
    if req.get("creds"):
        client.set_session_credentials(req["creds"]["user"], req["creds"]["secret"], "")


def message(topic: str, m: dict) -> Message:
    msg = Message(topic)
    msg.set_body(base64.b64decode(m["body"]))
    if m.get("key"):
        msg.set_keys(m["key"])
    if m.get("tag"):
        msg.set_tags(m["tag"])
    for k, v in (m.get("props") or {}).items():
        msg.set_property(k, v)
    if m.get("delay_s"):
        msg.set_delay_time_level(DELAY_LEVEL[m["delay_s"]])
    return msg


def send_sync(producer: Producer, msg: Message):
    """send_sync, retried once after a second: the client's first send fails at once ("No
    route info") when the broker connection is still being made by its heartbeat thread
    (a 3 ms transport lock timeout), as a loaded machine shows."""
    try:
        return producer.send_sync(msg)
    except Exception:
        time.sleep(1)
        return producer.send_sync(msg)


def produce(req: dict) -> None:
    producer = Producer(f"PG_{req['topic']}", max_message_size=4 << 20)
    producer.set_namesrv_addr(req["namesrv"])
    credentials(producer, req)
    producer.start()
    try:
        msgs = [message(req["topic"], m) for m in req["msgs"]]
        if len(msgs) > 100:  # the burst: asynchronous sends, every callback awaited
            acked = threading.Semaphore(0)
            failures: list[str] = []
            for msg in msgs:
                producer.send_async(msg, lambda _r: acked.release(),
                                    lambda e: (failures.append(str(e)), acked.release()))
            for _ in msgs:
                if not acked.acquire(timeout=60):
                    raise RuntimeError("asynchronous sends unacknowledged after 60 s")
            if failures:
                raise RuntimeError(f"{len(failures)} sends failed: {failures[0]}")
        else:
            for raw, msg in zip(req["msgs"], msgs):
                if req.get("ordered"):
                    result = producer.send_orderly(msg, zlib.crc32((raw.get("key") or "").encode()))
                else:
                    result = send_sync(producer, msg)
                if int(result.status) != 0:
                    raise RuntimeError(f"send status {result.status}")
    finally:
        producer.shutdown()
    out({"done": True})


def consume(req: dict) -> None:
    consumer = PushConsumer(req["group"], orderly=bool(req.get("orderly")))
    consumer.set_namesrv_addr(req["namesrv"])
    credentials(consumer, req)
    n = req.get("n")
    lock = threading.Lock()
    count = 0

    def on_message(msg) -> None:
        nonlocal count
        with lock:
            if n is not None and count >= n:
                raise RuntimeError("beyond N: left for the next consumer")
            count += 1
            props = {}
            for name in PROPS:
                value = msg.get_property(name)
                if value:
                    props[name] = value.decode()
            out({"msg": {"body": base64.b64encode(msg.body or b"").decode(),
                         "key": (msg.keys or b"").decode(), "tag": (msg.tags or b"").decode(),
                         "props": props, "ts": msg.born_timestamp,
                         "redelivered": msg.reconsume_times > 0}})
        if req.get("nack"):
            raise RuntimeError("refused on purpose (retry path)")

    consumer.subscribe(req["topic"], on_message, req.get("tag_filter") or "*")
    consumer.start()
    out({"ready": True})
    sys.stdin.readline()  # "stop" (or the end of stdin)
    time.sleep(0.5)
    consumer.shutdown()  # persists the consumed offsets


def main() -> int:
    req = json.loads(sys.stdin.readline())
    try:
        {"produce": produce, "consume": consume}[req["cmd"]](req)
    except Exception as exc:
        out({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
