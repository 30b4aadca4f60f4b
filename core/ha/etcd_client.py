"""A small etcd v3 client over etcd's JSON gateway (HTTP/1.1 POSTs to ``/v3/...``), for the
failover's election (core/ha/election.py): ranges, puts, deletes, transactions and leases.

Why the gateway and not gRPC: it is what Patroni runs in production against etcd 3, it
needs no grpcio/protobuf pinning (the old ``etcd3`` package no longer imports with current
protobuf), and h11 is already the broker's HTTP codec. Each endpoint gets one kept
connection, one request at a time (the election sends a few requests a second). Keys and
values travel base64-encoded and 64-bit integers come back as strings; a failed
transaction omits ``succeeded``. A request that gets no answer within ``timeout`` tries
the next endpoint; `EtcdUnavailable` when none answered. This module never decides
anything: the rules live in the election.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from typing import Any

import h11
import orjson


class EtcdError(Exception):
    """etcd answered with an error (an unknown lease, a bad request)."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered in time."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


@dataclass(slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_json(cls, kv: dict[str, Any]) -> "KeyValue":
        return cls(_unb64(kv.get("key")), _unb64(kv.get("value")), int(kv.get("create_revision", 0)),
                   int(kv.get("mod_revision", 0)), int(kv.get("version", 0)), int(kv.get("lease", 0)))


@dataclass(slots=True)
class Compare:
    """One condition of a transaction: ``target`` CREATE, MOD, VERSION, VALUE or LEASE of
    ``key`` compared (EQUAL, NOT_EQUAL, GREATER, LESS) with ``value``."""

    key: bytes
    target: str
    result: str
    value: int | bytes

    def to_json(self) -> dict[str, Any]:
        field_name = {"CREATE": "create_revision", "MOD": "mod_revision", "VERSION": "version",
                      "VALUE": "value", "LEASE": "lease"}[self.target]
        value = _b64(self.value) if isinstance(self.value, bytes) else str(self.value)
        return {"key": _b64(self.key), "target": self.target, "result": self.result, field_name: value}


def put_op(key: bytes, value: bytes, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def range_op(key: bytes) -> dict[str, Any]:
    return {"request_range": {"key": _b64(key)}}


@dataclass(slots=True)
class TxnResult:
    succeeded: bool
    revision: int  # the store's revision after the transaction
    ranges: list[list[KeyValue]] = field(default_factory=list)  # each range op's keys, in order


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (etcd's range_end)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


class _Connection:
    """One kept HTTP/1.1 connection to one endpoint."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.h11: h11.Connection | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None or self.h11 is None or self.h11.our_state is not h11.IDLE:
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.h11 = h11.Connection(h11.CLIENT)
        conn, reader, writer = self.h11, self.reader, self.writer
        assert reader is not None
        headers = [("Host", f"{self.host}:{self.port}"), ("Content-Type", "application/json"),
                   ("Content-Length", str(len(body)))]
        writer.write(conn.send(h11.Request(method="POST", target=path, headers=headers)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        status, chunks = 0, []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(1 << 16)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    raise ConnectionError("etcd closed the connection mid-answer")
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            await self.close()
        return status, b"".join(chunks)

    async def close(self) -> None:
        writer, self.writer, self.reader, self.h11 = self.writer, None, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


class EtcdClient:
    """``endpoints``: "host:port" of etcd members (any of them answers)."""

    def __init__(self, endpoints: list[str], timeout: float = 2.0) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        self.timeout = timeout
        self._connections = []
        for endpoint in endpoints:
            host, _, port = endpoint.strip().removeprefix("http://").rpartition(":")
            self._connections.append(_Connection(host or "127.0.0.1", int(port)))
        self._current = 0  # the endpoint that answered last
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        for conn in self._connections:
            await conn.close()

    async def call(self, path: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """POST ``body`` to ``/v3/<path>`` on the first endpoint that answers."""
        data = orjson.dumps(body)
        errors = []
        async with self._lock:
            for i in range(len(self._connections)):
                index = (self._current + i) % len(self._connections)
                conn = self._connections[index]
                try:
                    status, answer = await asyncio.wait_for(conn.post(f"/v3/{path}", data),
                                                            timeout or self.timeout)
                except (OSError, asyncio.TimeoutError, h11.ProtocolError) as exc:
                    await conn.close()
                    errors.append(f"{conn.host}:{conn.port}: {exc or type(exc).__name__}")
                    continue
                self._current = index
                try:
                    parsed = orjson.loads(answer) if answer else {}
                except orjson.JSONDecodeError as exc:
                    raise EtcdError(f"etcd answered {status} with bytes that are not JSON") from exc
                if status != 200 or "error" in parsed:
                    raise EtcdError(f"etcd {path}: {status} {parsed.get('message') or parsed.get('error')}")
                return parsed
        raise EtcdUnavailable("no etcd endpoint answered: " + "; ".join(errors))

    # -- keys -------------------------------------------------------------------------------
    async def get(self, key: bytes) -> KeyValue | None:
        answer = await self.call("kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs") or []
        return KeyValue.from_json(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        answer = await self.call("kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))})
        return [KeyValue.from_json(kv) for kv in answer.get("kvs") or []]

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        """The revision of the put."""
        answer = await self.call("kv/put", put_op(key, value, lease)["request_put"])
        return int(answer["header"]["revision"])

    async def delete(self, key: bytes) -> int:
        """How many keys were deleted."""
        answer = await self.call("kv/deleterange", {"key": _b64(key)})
        return int(answer.get("deleted", 0))

    async def txn(self, compare: list[Compare], success: list[dict[str, Any]],
                  failure: list[dict[str, Any]] = ()) -> TxnResult:  # type: ignore[assignment]
        answer = await self.call("kv/txn", {"compare": [c.to_json() for c in compare],
                                            "success": list(success), "failure": list(failure)})
        ranges = [[KeyValue.from_json(kv) for kv in r["response_range"].get("kvs") or []]
                  for r in answer.get("responses") or [] if "response_range" in r]
        return TxnResult(bool(answer.get("succeeded")), int(answer["header"]["revision"]), ranges)

    # -- leases -----------------------------------------------------------------------------
    async def grant(self, ttl_s: int) -> int:
        """A new lease of ``ttl_s`` seconds; its id."""
        answer = await self.call("lease/grant", {"TTL": str(ttl_s)})
        return int(answer["ID"])

    async def keepalive(self, lease: int) -> int:
        """Renew ``lease``; the seconds it has left now (0: it expired or was revoked)."""
        answer = await self.call("lease/keepalive", {"ID": str(lease)})
        return int(answer.get("result", {}).get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        """End ``lease`` now (its keys are deleted); an unknown lease is not an error."""
        try:
            await self.call("lease/revoke", {"ID": str(lease)})
        except EtcdError as exc:
            if "not found" not in str(exc):
                raise
