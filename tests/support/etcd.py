"""Private etcd servers for the failover tests: Debian's etcd 3.4 (`scripts/install-test-deps`)
on 127.0.0.1 free ports with its own data dir, one node or a cluster of three; ready when
every node's /health says so. A missing etcd binary fails the test (never a skip)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.remoting import free_port

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


@dataclass
class EtcdNode:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as resp:
                return b'"true"' in resp.read()
        except OSError:
            return False


@dataclass
class EtcdCluster:
    nodes: list[EtcdNode] = field(default_factory=list)

    @property
    def endpoints(self) -> str:
        """``etcdEndpoints`` for a broker: every node, comma-separated."""
        return ",".join(n.endpoint for n in self.nodes)

    def start(self, timeout: float = 30) -> None:
        assert Path(ETCD).exists(), "etcd is not installed: run scripts/install-test-deps"
        initial = ",".join(f"{n.name}=http://127.0.0.1:{n.peer_port}" for n in self.nodes)
        for n in self.nodes:
            self._spawn(n, initial)
        deadline = time.monotonic() + timeout
        while not all(n.healthy() for n in self.nodes):
            for n in self.nodes:
                assert n.proc is not None and n.proc.poll() is None, n.log.read_text()[-2000:]
            assert time.monotonic() < deadline, "etcd did not become healthy"
            time.sleep(0.1)

    def _spawn(self, n: EtcdNode, initial: str) -> None:
        args = [ETCD, "--name", n.name, "--data-dir", str(n.data_dir),
                "--listen-client-urls", f"http://127.0.0.1:{n.client_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{n.client_port}",
                "--listen-peer-urls", f"http://127.0.0.1:{n.peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{n.peer_port}",
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--heartbeat-interval", "50", "--election-timeout", "500"]
        with open(n.log, "a") as log:
            n.proc = subprocess.Popen(args, stdout=log, stderr=log)

    def kill(self, index: int) -> None:
        proc = self.nodes[index].proc
        assert proc is not None
        proc.kill()
        proc.wait(10)

    def stop(self) -> None:
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            if n.proc is not None:
                try:
                    n.proc.wait(10)
                except subprocess.TimeoutExpired:
                    n.proc.kill()
                    n.proc.wait()


def etcd_cluster(root: Path, size: int = 1) -> EtcdCluster:
    """``size`` nodes (not started) with data dirs under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    return EtcdCluster([EtcdNode(f"etcd{i}", free_port(), free_port(), root / f"etcd{i}.data",
                                 root / f"etcd{i}.log") for i in range(size)])
