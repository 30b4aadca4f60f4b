"""A Spark standalone cluster on loopback, for the pipeline's tests and benchmark and for
trying cluster mode on one machine: a master and workers started from the jars pyspark
ships (``bin/spark-class ...deploy.master.Master`` / ``...deploy.worker.Worker``), each
worker with one core, a small memory share and a work directory of its own, every port a
free ephemeral one on 127.0.0.1; `Cluster.stop` ends exactly the processes it started.
The executors run this interpreter, where the package is installed: that is how the data
source reaches them, as a user's cluster would have it installed (docs/pipeline.md). It
must never be mistaken for a deployment: no security, no recovery, loopback only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

WORKER_MEMORY = "1g"  # what a worker offers its executors
EXECUTOR_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1"}
TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@dataclass
class Cluster:
    master_url: str
    work_dirs: list[Path]
    procs: list[subprocess.Popen] = field(default_factory=list)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


def wait_for_executors(spark: object, count: int, timeout_s: float = TIMEOUT_S) -> int:
    """Wait until `count` executors have registered with the session's driver (a query
    started earlier would run on the first alone); how many did."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout_s
    while status().size() - 1 < count and time.monotonic() < deadline:  # the driver is one
        time.sleep(0.2)
    return status().size() - 1


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}


def _start(args: list[str], log: Path, ready: str) -> subprocess.Popen:
    with open(log, "w") as out:
        proc = subprocess.Popen([spark_class(), *args], stdout=out, stderr=subprocess.STDOUT, env=_env())
    deadline = time.monotonic() + TIMEOUT_S
    while ready not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{args[0]} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc


def start_cluster(root: Path, workers: int = 2) -> Cluster:
    """A master and `workers` workers of one core each, logs and work dirs under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", [root / f"worker-{i}" for i in range(workers)])
    try:
        cluster.procs.append(_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                     "--port", str(port), "--webui-port", str(free_port())],
                                    root / "master.log", "I have been elected leader"))
        for i, work in enumerate(cluster.work_dirs):
            work.mkdir(parents=True)
            cluster.procs.append(_start(["org.apache.spark.deploy.worker.Worker", cluster.master_url,
                                         "--host", "127.0.0.1", "--port", str(free_port()),
                                         "--webui-port", str(free_port()), "--cores", "1",
                                         "--memory", WORKER_MEMORY, "--work-dir", str(work)],
                                        root / f"worker-{i}.log", "Successfully registered with master"))
    except BaseException:
        cluster.stop()
        raise
    return cluster
