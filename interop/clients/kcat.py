"""kcat (Debian package; librdkafka's command-line producer and consumer), run as a CLI:
`-P` with `-K` keys and `-H` headers, `-G` balanced consumer with `-J` JSON output."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
from itertools import groupby

from ..base import Client, Consume, In, Missing, Out
from . import kafka_common as kc

KEY_DELIMITER = "\x1f"  # unit separator: never in a key or a scenario body


class Kcat(Client):
    name = "kcat"
    protocol = "kafka"
    codecs = kc.CODECS
    lacks = {**kc.LACKS, "transactions": "kcat has no transactional producer"}

    def check(self) -> None:
        if shutil.which("kcat") is None:
            raise Missing("kcat is not installed (scripts/install-test-deps installs it)")

    def version(self) -> str:
        text = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
        return next((w for w in text.split() if w[:1].isdigit() and "." in w), "?")

    def _base(self) -> list[str]:
        args = ["kcat", "-b", self.ep.kafka, "-q"]
        if self.creds:
            args += ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
                     "-X", f"sasl.username={self.creds.user}", "-X", f"sasl.password={self.creds.secret}"]
        return args

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        # one kcat run per run of messages with the same headers (-H applies to all of a run)
        for (_, headers), run in groupby(msgs, key=lambda m: (m.key is None, tuple(kc.headers(m)))):
            run = list(run)
            has_key = run[0].key is not None
            args = self._base() + ["-P", "-t", topic, "-X", f"message.max.bytes={kc.MAX_BYTES}",
                                   "-X", "message.timeout.ms=15000"]
            if compression:
                args += ["-z", compression]
            if has_key:
                args += ["-K", KEY_DELIMITER]
            for name, value in headers:
                args += ["-H", f"{name}={value.decode()}"]
            data = b"\n".join((m.key.encode() + KEY_DELIMITER.encode() if has_key else b"") + m.body
                              for m in run) + b"\n"
            proc = subprocess.run(args, input=data, capture_output=True, timeout=120)
            if proc.returncode != 0 or b"ERROR" in proc.stderr:
                raise RuntimeError(f"kcat -P exited {proc.returncode}: "
                                   f"{proc.stderr.decode(errors='replace').strip()[-200:]}")

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        args = self._base() + ["-G", group, "-J", "-u", "-X", "auto.offset.reset=earliest",
                               "-X", f"fetch.message.max.bytes={kc.MAX_BYTES}", topic]
        if c.n is not None:
            args[-1:-1] = ["-c", str(c.n)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()
        if c.ready is not None:
            c.ready.set()
        got: list[In] = []
        started, last = time.monotonic(), None
        try:
            while not c.done(len(got), started, last):
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if line is None:
                    break
                rec = json.loads(line)
                h = rec.get("headers") or []
                payload = rec.get("payload")
                key = rec.get("key")
                got.append(kc.received(payload.encode() if payload is not None else b"",
                                       key.encode() if key is not None else None,
                                       list(zip(h[::2], [v.encode() if v is not None else None for v in h[1::2]])),
                                       rec.get("ts")))
                last = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.terminate()  # kcat commits its offsets as it closes
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return got


CLIENT = Kcat
