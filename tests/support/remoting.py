"""Remoting test support: raw frames over a socket, a request/response connection (the
native client's), free ports, the ACL tests' plain_acl.yml."""

from __future__ import annotations

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


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a broker restarted on it
    finds it free, while an ephemeral one may meanwhile be any client's local port (a
    restart then failed with "address already in use" in a loaded full run)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first_ephemeral = int(f.read().split()[0])
    for _ in range(200):
        port = random.randrange(10_000, first_ephemeral)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
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
