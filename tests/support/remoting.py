"""Remoting test support: raw frames over a socket, a request/response connection (the
native client's), free ports, the ACL tests' plain_acl.yml."""

from __future__ import annotations

import collections
import os
import random
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from rocketport.client.transport import Connection, Credentials
from rocketport.protocols.remoting import RemotingCommand, RemotingConnection, RequestCode, encode_command


@asynccontextmanager
async def remoting_client(addr: str, *, credentials: Credentials | None = None) -> AsyncIterator[Connection]:
    """One connection of `rocketport.client` (requests pipelined, matched by opaque, signed
    with ``credentials``), closed on exit."""
    conn = await Connection.open(addr, credentials=credentials)
    try:
        yield conn
    finally:
        conn.close()


def request(code: RequestCode | int, ext_fields: dict[str, str] | None = None,
            body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=int(code), ext_fields=ext_fields or {}, body=body)


def frame_bytes(command: RemotingCommand) -> bytes:
    return b"".join(bytes(part) for part in encode_command(command))


def roundtrip(addr: tuple[str, int], data: bytes, timeout: float = 5.0) -> list:
    """Send ``data`` in one write, half-close, read until the server closes; decoded events."""
    conn = RemotingConnection()
    events = []
    with socket.create_connection(addr, timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            events.extend(conn.receive_data(chunk))
    return events


# this process's recent picks: a test picks several ports before its servers bind any
_handed_out: collections.deque[int] = collections.deque(maxlen=1000)


def _port_range() -> range:
    """Below the kernel's ephemeral range; under pytest-xdist, this worker's own slice of
    it (inherited by the processes a test starts), so that two workers never pick the same
    port between one's pick and its bind (a full run on two workers failed on that once)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first, end = 10_000, int(f.read().split()[0])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker.startswith("gw") and workers > 1:
        span = (end - first) // workers
        first += int(worker[2:]) * span
        end = first + span
    return range(first, end)


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a broker restarted on it
    finds it free, while an ephemeral one may meanwhile be any client's local port (a
    restart then failed with "address already in use" in a loaded full run)."""
    ports = _port_range()
    for _ in range(200):
        port = random.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.append(port)
        return port
    raise RuntimeError("no free port below the ephemeral range")


# plain_acl.yml for the ACL tests: "app" may publish and subscribe Open, only subscribe
# ReadOnly, nothing else; "ops" is an admin
ACL_FILE = """\
accounts:
  - accessKey: app
    secretKey: app-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Closed=DENY
      - Open=PUB|SUB
      - ReadOnly=SUB
  - accessKey: ops
    secretKey: ops-secret
    admin: true
"""
