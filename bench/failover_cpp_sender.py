"""The RocketMQ C++ client (PyPI rocketmq 0.4.4) sending for failover_bench.py: one sync
send every 100 ms for ``SECONDS``, one JSON line per attempt ({"t": wall time, "ok": bool}
or an "error"). Run as a subprocess (the client is a C library)."""

from __future__ import annotations

import json
import sys
import time

from rocketmq.client import Message, Producer


def main() -> None:
    namesrv, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    producer = Producer("failover-cpp")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    deadline = time.time() + seconds
    try:
        i = 0
        while time.time() < deadline:
            msg = Message(topic)
            msg.set_body(f"cpp-{i}")
            i += 1
            try:
                ok = int(producer.send_sync(msg).status) == 0  # SEND_OK
                line = {"t": time.time(), "ok": ok}
            except Exception as exc:  # noqa: BLE001 - the route's master is gone: reported, retried
                line = {"t": time.time(), "ok": False, "error": str(exc)[:200]}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()
            time.sleep(0.1)
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
