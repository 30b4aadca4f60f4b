"""A replicated broker group on loopback for the HA tests: a name server process, a master
and a slave broker process (tests.support.processes), fixed free ports so either can be
killed and started again; the stores' CommitLogs read back for byte comparison."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rocketport.core.store.commitlog import CommitLog
from tests.support.processes import REPO, RestartableBroker
from tests.support.remoting import free_port

SEGMENT = 1 << 20  # small CommitLog segments: replication crosses segment ends


def start_namesrv(root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rocketport", "namesrv", "--host", "127.0.0.1",
                             "-p", str(port), "--kv-config", str(root / "kv.json")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
    seen = ""
    deadline = time.monotonic() + 30
    while "listening" not in seen and time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stderr.readline()
    assert "listening" in seen, seen
    return proc, f"127.0.0.1:{port}"


@dataclass
class Node:
    broker: RestartableBroker
    port: int
    kafka_port: int
    root: Path
    ha_port: int = 0
    extra: list[str] = field(default_factory=list)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def node(base: Path, name: str, namesrv: str, *settings: str, kafka: bool = False) -> Node:
    root = base / name / "store"
    root.parent.mkdir(parents=True, exist_ok=True)
    port, kafka_port, ha_port = free_port(), free_port(), free_port()
    all_settings = (f"listenPort={port}", f"haListenPort={ha_port}", f"namesrvAddr={namesrv}",
                    f"kafka.port={kafka_port}", f"kafka.enabled={str(kafka).lower()}",
                    f"mappedFileSizeCommitLog={SEGMENT}",
                    "haSendHeartbeatInterval=500", "syncFlushTimeout=3000", *settings)
    return Node(RestartableBroker(root, *all_settings), port, kafka_port, root, ha_port)


def master_and_slave(base: Path, namesrv: str, *, role: str = "SYNC_MASTER",
                     flush: str = "SYNC_FLUSH", slave_settings: tuple[str, ...] = (),
                     kafka: bool = False, name: str | None = None) -> tuple[Node, Node]:
    """A master and its slave (broker group ``name``, else the default broker-a)."""
    group = (f"brokerName={name}",) if name else ()
    prefix = f"{name}-" if name else ""
    master = node(base, prefix + "master", namesrv, f"brokerRole={role}", f"flushDiskType={flush}", *group,
                  kafka=kafka)
    slave = node(base, prefix + "slave", namesrv, "brokerRole=SLAVE", "brokerId=1", *group, *slave_settings,
                 kafka=kafka)
    return master, slave


def log_end(root: Path) -> int:
    """Where the valid records of a stopped broker's CommitLog end."""
    cl = CommitLog(str(root / "commitlog"), SEGMENT, warm=False)
    cl.queue.load()
    try:
        scan = cl.scan(cl.min_offset, True)
        for _ in scan:
            pass
        return scan.end
    finally:
        cl.close()


def log_digest(root: Path, end: int) -> str:
    """sha256 of a stopped broker's CommitLog bytes [0, end)."""
    h = hashlib.sha256()
    offset = 0
    while offset < end:
        path = root / "commitlog" / f"{offset - offset % SEGMENT:020d}"
        with open(path, "rb") as f:
            f.seek(offset % SEGMENT)
            chunk = f.read(min(end - offset, SEGMENT - offset % SEGMENT))
        assert chunk, (path, offset)
        h.update(chunk)
        offset += len(chunk)
    return h.hexdigest()


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
