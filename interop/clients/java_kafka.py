"""kafka-clients (Java; the client Spark, Flink and Kafka Connect embed): the jars that
scripts/install-test-deps puts in .cache/kafka-java (KAFKA_JAVA_LIB names another folder),
interop/drivers/java/KafkaDriver.java compiled once into .cache/interop-java (again when the
source changes)."""

from __future__ import annotations

import base64
import hashlib
import os
import queue
import shutil
import subprocess
import threading
import time
import zipfile
from pathlib import Path

from ..base import Client, Consume, In, Missing, Out
from . import kafka_common as kc
from .driver import CACHE, DRIVERS

SOURCE = DRIVERS / "java" / "KafkaDriver.java"
LIB = Path(os.environ.get("KAFKA_JAVA_LIB") or CACHE / "kafka-java")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _line(m: Out) -> str:
    fields = [_b64(m.body), _b64(m.key.encode()) if m.key is not None else "-"]
    fields += [f"{name}={_b64(value)}" for name, value in kc.headers(m)]
    return "\t".join(fields)


class JavaKafka(Client):
    name = "kafka-clients (Java)"
    protocol = "kafka"
    codecs = kc.CODECS
    lacks = dict(kc.LACKS)

    def _classes(self) -> Path:
        digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
        return CACHE / "interop-java" / digest

    def check(self) -> None:
        if not (LIB / "kafka-clients.jar").exists():
            raise Missing(f"no kafka-clients.jar in {LIB} (scripts/install-test-deps puts it there)")
        if shutil.which("javac") is None or shutil.which("java") is None:
            raise Missing("a JDK (java, javac) is not installed")
        out = self._classes()
        if not (out / "KafkaDriver.class").exists():
            tmp = out.with_name(out.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            proc = subprocess.run(["javac", "-d", str(tmp), "-cp", f"{LIB}/*", str(SOURCE)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise Missing(f"javac failed: {proc.stderr.strip()[-300:]}")
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)

    def version(self) -> str:
        with zipfile.ZipFile(LIB / "kafka-clients.jar") as jar:
            for line in jar.read("kafka/kafka-version.properties").decode().splitlines():
                if line.startswith("version="):
                    return line.split("=", 1)[1]
        return "?"

    def _cmd(self, mode: str, topic: str, group: str = "-", n: int | None = None,
             compression: str | None = None) -> list[str]:
        user, password = (self.creds.user, self.creds.secret) if self.creds else ("-", "-")
        return ["java", "-cp", f"{self._classes()}:{LIB}/*", "KafkaDriver", mode, self.ep.kafka, topic,
                group, str(n) if n is not None else "-", compression or "none", user, password]

    def _run(self, cmd: list[str], data: str) -> None:
        proc = subprocess.run(cmd, input=data, capture_output=True, text=True, timeout=150)
        if proc.returncode != 0 or "DONE" not in proc.stdout:
            lines = [ln for ln in proc.stderr.splitlines() if "Exception" in ln or "Error" in ln]
            raise RuntimeError(f"java exited {proc.returncode}: {(lines or [proc.stderr[-200:]])[0][:200]}")

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        self._run(self._cmd("produce", topic, compression=compression),
                  "".join(_line(m) + "\n" for m in msgs))

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        self._run(self._cmd("txn", topic), "".join(f"C\t{_line(m)}\n" for m in commit)
                  + "".join(f"A\t{_line(m)}\n" for m in abort))

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        proc = subprocess.Popen(self._cmd("consume", topic, group, c.n), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()
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
                if line == "READY" and c.ready is not None:
                    c.ready.set()
                if not line.startswith("MSG\t"):
                    continue
                f = line.split("\t")
                hdrs = [(h.split("=", 1)[0], base64.b64decode(h.split("=", 1)[1])) for h in f[4:]]
                got.append(kc.received(base64.b64decode(f[1]), None if f[2] == "-" else base64.b64decode(f[2]),
                                       hdrs, int(f[3])))
                last = time.monotonic()
        finally:
            try:
                proc.stdin.write("stop\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                proc.wait(30)  # commits what it printed
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return got


CLIENT = JavaKafka
