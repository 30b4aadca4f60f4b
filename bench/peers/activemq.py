"""ActiveMQ as a benchmark peer: one private broker on loopback with STOMP on a given port.

The STOMP benchmark compares Rocketport with ActiveMQ in the same run. This module runs
Debian's ``activemq`` in the foreground (its jar's ``start`` task, as the current user: the
Debian launcher would switch to the ``activemq`` user) with every file (config,
KahaDB journal, logs, tmp) under ``workdir``, so it never touches a system-wide instance,
and stops it again. Persistence is KahaDB with ``journalDiskSyncStrategy="always"`` (a fsync
per write batch, as Rocketport's SYNC_FLUSH), and the STOMP transport listens on
127.0.0.1 only. It needs the Debian package (``scripts/install-test-deps`` installs it;
``ensure_installed`` says how when it is missing).

    from peers import activemq            # bench/ is on sys.path for bench scripts
    broker = activemq.start(stomp_port=61615, workdir="/tmp/amq")
    ...
    broker.stop()

Run as a script for a manual check: ``python bench/peers/activemq.py STOMP_PORT``.
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

HOME = "/usr/share/activemq"
JAR = f"{HOME}/bin/activemq.jar"
JAVA = "/usr/bin/java"
# what Debian's launcher passes to Java 9+ (the broker's Spring and JMX code needs them)
_JAVA_OPENS = ["--add-reads=java.xml=java.logging",
               *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
                   "java.security", "java.net", "java.lang", "java.util", "java.util.concurrent",
                   "java.util.concurrent.atomic")),
               "--add-opens=java.naming/javax.naming.spi=ALL-UNNAMED",
               "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED"]
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0

_CONFIG = """\
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="bench"
          dataDirectory="{data}" persistent="true" schedulerSupport="false">
    <persistenceAdapter>
      <kahaDB directory="{data}/kahadb" journalDiskSyncStrategy="always"/>
    </persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="256 mb"/></memoryUsage>
      <storeUsage><storeUsage limit="8 gb"/></storeUsage>
      <tempUsage><tempUsage limit="2 gb"/></tempUsage>
    </systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""


class PeerUnavailable(RuntimeError):
    """ActiveMQ is not installed or did not come up; the message says why."""


def ensure_installed() -> None:
    if not os.path.exists(JAR):
        raise PeerUnavailable("activemq is not installed: run scripts/install-test-deps "
                              "(Debian package activemq)")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass(slots=True)
class ActiveMQ:
    """A running broker; ``stop`` ends it (and only it)."""

    stomp_port: int
    workdir: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        """The JVM's pid (for CPU accounting)."""
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)


def start(stomp_port: int, workdir: str) -> ActiveMQ:
    """Start a broker with STOMP on 127.0.0.1:``stomp_port``; returns once the port accepts.
    Raises PeerUnavailable."""
    ensure_installed()
    workdir = os.path.abspath(workdir)
    conf, data, tmp = (os.path.join(workdir, d) for d in ("conf", "data", "tmp"))
    for folder in (conf, data, tmp):
        os.makedirs(folder, exist_ok=True)
    config = os.path.join(conf, "activemq.xml")
    with open(config, "w") as f:
        f.write(_CONFIG.format(data=data, port=stomp_port))
    shutil.copy("/etc/activemq/instances-available/main/log4j2.properties", conf)
    command = [JAVA, "-Xms512M", "-Xmx512M", *_JAVA_OPENS, f"-Djava.io.tmpdir={tmp}",
               f"-Dactivemq.classpath={HOME}/lib/", f"-Dactivemq.home={HOME}",
               f"-Dactivemq.base={workdir}", f"-Dactivemq.conf={conf}", f"-Dactivemq.data={data}",
               "-jar", JAR, "start", f"xbean:file:{config}"]
    log = open(os.path.join(workdir, "server.out"), "ab")
    try:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=workdir)
    finally:
        log.close()
    handle = ActiveMQ(stomp_port, workdir, process)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _accepts(stomp_port):
        if process.poll() is not None:
            raise PeerUnavailable(f"activemq exited ({process.returncode}); see {workdir}/server.out")
        if time.monotonic() > deadline:
            handle.stop()
            raise PeerUnavailable(f"activemq did not listen within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.25)
    return handle


if __name__ == "__main__":
    import tempfile
    port = int(sys.argv[1])
    folder = tempfile.mkdtemp(prefix="activemq-peer-")
    started = time.monotonic()
    peer = start(port, folder)
    print(f"activemq up in {time.monotonic() - started:.1f} s: stomp {port}")
    peer.stop()
    print("stopped")
    shutil.rmtree(folder, ignore_errors=True)
