"""A fresh broker for the matrix: `python -m rocketport broker` as a subprocess.

A subprocess, not a BrokerServer in the runner's thread: the broker runs exactly as users
run it (uvloop, its own process), a client that crashes or wedges its process cannot take
the broker with it, and a broker that dies is seen (its exit status and log tail go into
the cells) instead of hanging the run. Every front-end listens on a free loopback port,
read back from the broker's "listening on" log lines.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .base import Endpoints

REPO = Path(__file__).resolve().parents[1]
_LISTEN = re.compile(r"(broker \(remoting\)|name server|kafka|amqp|stomp) listening on (\S+)$")
ROLES = {"broker (remoting)": "remoting", "name server": "namesrv", "kafka": "kafka",
         "amqp": "amqp", "stomp": "stomp"}

# delay level 2 = 3 s (the delayed-message scenario); every other level 1 s, so the retry
# path (level 3 + reconsume count) is quick
DELAY_LEVELS = " ".join(["1s", "3s"] + ["1s"] * 16)
DELAY_LEVEL_OF = {3: 2}  # seconds -> level, for clients that send delay levels
ACL_USER, ACL_SECRET = "interop", "interop-secret"
ACL_TOPIC, ACL_DENIED_TOPIC = "interop_acl_ok", "interop_acl_denied"
ACL_GROUP = "interop_acl_group"  # also a topic: an AMQP queue is one, and needs SUB on it


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Broker:
    """One broker process with every front-end on; `stop()` is SIGTERM then SIGKILL."""

    def __init__(self, root: Path, *, acl: bool = False) -> None:
        self.root = root
        self.acl = acl
        self.proc: subprocess.Popen | None = None
        self.ep: Endpoints | None = None
        self.log_path = root / "broker.log"

    def settings(self) -> list[str]:
        # the remoting port is a real one, as users run it: with listenPort=0 the store host
        # written into every message (the head of its offsetMsgId) says port 0, and clients
        # that answer to a message's store host (the C++ client's send-back) cannot reach it
        s = [f"storePathRootDir={self.root / 'store'}", f"listenPort={_free_port()}", "namesrv.port=0",
             "kafka.port=0", "stomp.port=0", "stomp.wsPort=0", "amqp.port=0", "http.port=0",
             "mappedFileSizeCommitLog=268435456", f"messageDelayLevel={DELAY_LEVELS}",
             "namesrv.enabled=true", "kafka.enabled=true", "stomp.enabled=true", "amqp.enabled=true"]
        if self.acl:
            acl_file = self.root / "plain_acl.yml"
            acl_file.write_text(
                "accounts:\n"
                f"  - accessKey: {ACL_USER}\n    secretKey: {ACL_SECRET}\n    admin: true\n"
                "    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
                f"    topicPerms: [{ACL_TOPIC}=PUB|SUB, {ACL_DENIED_TOPIC}=SUB, {ACL_GROUP}=PUB|SUB]\n")
            s += ["aclEnable=true", f"plainAclFile={acl_file}", "kafkaSaslMechanisms=PLAIN"]
        return s

    def start(self, timeout: float = 60) -> Endpoints:
        self.root.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "rocketport", "broker", "-c", "conf/broker.yaml"]
        for item in self.settings():
            cmd += ["--set", item]
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        found: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            for line in text.splitlines():
                m = _LISTEN.search(line)
                if m and m.group(1) in ROLES:
                    found[ROLES[m.group(1)]] = m.group(2)
            if " ready (pid" in text:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited {self.proc.returncode}: {self.tail()}")
            time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError(f"broker not ready in {timeout:.0f} s: {self.tail()}")
        self.ep = Endpoints(**{role: found[role] for role in ROLES.values()})
        return self.ep

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
