"""RabbitMQ as a benchmark peer: one private node on loopback, AMQP, STOMP and Web-STOMP on given ports.

Benchmarks compare Rocketport with RabbitMQ in the same run (AMQP 0-9-1 and STOMP). This
module starts a throw-away node whose every file (Mnesia database, logs, config, cookie)
lives under ``workdir``, so it never touches a system-wide RabbitMQ nor another benchmark's
node, and stops it again. It needs Debian's ``rabbitmq-server`` (``scripts/install-test-deps``
installs it; ``ensure_installed`` says how when it is missing). Messages are made durable
by the benchmark itself (persistent publishes into durable queues).

    from peers import rabbitmq            # bench/ is on sys.path for bench scripts
    node = rabbitmq.start(amqp_port=5673, stomp_port=61614, workdir="/tmp/rmq")
    ...  # amqp://guest:guest@127.0.0.1:5673/  and STOMP on 127.0.0.1:61614
    node.stop()                           # (STOMP over WebSocket: node.web_stomp_port, path /ws)

The test suite's differential harness starts its node through this module too
(tests/support/rabbitmq.py loads it by path; nothing here imports the tests). Port 0 means a
free ephemeral port, read back from the handle.

Run as a script for a manual check: ``python bench/peers/rabbitmq.py AMQP_PORT STOMP_PORT``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


class PeerUnavailable(RuntimeError):
    """RabbitMQ is not installed or did not come up; the message says why."""


def ensure_installed() -> None:
    if not os.path.exists(SERVER):
        raise PeerUnavailable("rabbitmq-server is not installed: run scripts/install-test-deps "
                              "(Debian package rabbitmq-server)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass(slots=True)
class RabbitMQ:
    """A running node; ``stop`` ends it (and only it)."""

    amqp_port: int
    stomp_port: int
    workdir: str
    node: str
    process: subprocess.Popen
    env: dict[str, str]
    web_stomp_port: int = 0  # rabbitmq_web_stomp: STOMP over WebSocket at path /ws

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    @property
    def pid(self) -> int:
        """The Erlang VM's pid (for CPU accounting): the shell script execs into it."""
        return self.process.pid

    def ctl(self, *args: str, timeout: float = 30.0) -> str:
        """Run rabbitmqctl against this node (list_queues, ...)."""
        return subprocess.run([CTL, "-n", self.node, *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, check=True).stdout

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                subprocess.run([CTL, "-n", self.node, "stop"], env=self.env, timeout=STOP_TIMEOUT_S,
                               capture_output=True)
            except subprocess.TimeoutExpired:
                pass
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)


def start(amqp_port: int, stomp_port: int, workdir: str, web_stomp_port: int = 0) -> RabbitMQ:
    """Start a node listening on 127.0.0.1:``amqp_port`` (AMQP 0-9-1), ``stomp_port``
    (rabbitmq_stomp) and ``web_stomp_port`` (rabbitmq_web_stomp), 0 for a free port each;
    returns once every port accepts. Raises PeerUnavailable."""
    ensure_installed()
    amqp_port = amqp_port or _free_port()
    stomp_port = stomp_port or _free_port()
    web_stomp_port = web_stomp_port or _free_port()
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    node = f"rp{amqp_port}@localhost"
    config = os.path.join(workdir, "rabbitmq.conf")
    with open(config, "w") as f:
        f.write(f"listeners.tcp.1 = 127.0.0.1:{amqp_port}\n"
                f"stomp.listeners.tcp.1 = 127.0.0.1:{stomp_port}\n"
                "web_stomp.tcp.ip = 127.0.0.1\n"
                f"web_stomp.tcp.port = {web_stomp_port}\n"
                "loopback_users = none\n"
                "management_agent.disable_metrics_collector = true\n")
    plugins = os.path.join(workdir, "enabled_plugins")
    with open(plugins, "w") as f:
        f.write("[rabbitmq_stomp,rabbitmq_web_stomp].\n")
    cookie = os.path.join(workdir, ".erlang.cookie")
    if not os.path.exists(cookie):
        with open(cookie, "w") as f:
            f.write("ROCKETPORTBENCHPEER")
        os.chmod(cookie, 0o400)
    env = dict(os.environ,
               HOME=workdir,
               RABBITMQ_NODENAME=node,
               RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
               RABBITMQ_NODE_PORT=str(amqp_port),
               RABBITMQ_DIST_PORT=str(_free_port()),
               RABBITMQ_CONFIG_FILE=config,
               RABBITMQ_ENABLED_PLUGINS_FILE=plugins,
               RABBITMQ_MNESIA_BASE=os.path.join(workdir, "mnesia"),
               RABBITMQ_LOG_BASE=os.path.join(workdir, "log"),
               RABBITMQ_PID_FILE=os.path.join(workdir, "rabbit.pid"),
               RABBITMQ_CONF_ENV_FILE=os.path.join(workdir, "rabbitmq-env.conf"),
               RABBITMQ_ADVANCED_CONFIG_FILE=os.path.join(workdir, "advanced.config"),
               ERL_EPMD_ADDRESS="127.0.0.1")
    log = open(os.path.join(workdir, "server.out"), "ab")
    try:
        process = subprocess.Popen([SERVER], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=workdir)
    finally:
        log.close()
    handle = RabbitMQ(amqp_port, stomp_port, workdir, node, process, env, web_stomp_port)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (_accepts(amqp_port) and _accepts(stomp_port) and _accepts(web_stomp_port)):
        if process.poll() is not None:
            raise PeerUnavailable(f"rabbitmq-server exited ({process.returncode}); see "
                                  f"{workdir}/server.out and {workdir}/log")
        if time.monotonic() > deadline:
            handle.stop()
            raise PeerUnavailable(f"rabbitmq-server did not listen within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.25)
    return handle


if __name__ == "__main__":
    import tempfile
    amqp, stomp = (int(a) for a in sys.argv[1:3])
    tmp = tempfile.mkdtemp(prefix="rabbitmq-peer-")
    started = time.monotonic()
    peer = start(amqp, stomp, tmp)
    print(f"rabbitmq up in {time.monotonic() - started:.1f} s: {peer.url}, stomp {stomp}")
    peer.stop()
    print("stopped")
    shutil.rmtree(tmp, ignore_errors=True)
