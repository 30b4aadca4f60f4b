"""What every producer and consumer shares: identity, connections, routes, heartbeats.

A `ClientRuntime` owns the connection pool, the route table and two background tasks
(route refresh every 30 s, heartbeat every `heartbeat_interval_s`), started by `start`
and ended by `close`. Requests the brokers initiate are dispatched by code to handlers
the owner registers. It does not know what a producer or consumer does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable

from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode, make_response
from rocketport.protocols.remoting.bodies import HeartbeatData, encode_body

from .errors import ClientError
from .routing import ROUTE_REFRESH_S, RouteTable
from .transport import Connection, ConnectionPool, Credentials, Tls

log = logging.getLogger("rocketport.client")

RequestHandler = Callable[[Connection, RemotingCommand], None]
_instances = itertools.count()


def local_ip() -> str:
    """The address other hosts see us by (as RocketMQ puts in client ids); loopback if none."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        return sock.getsockname()[0]
    return "127.0.0.1"


class ClientRuntime:
    def __init__(self, namesrv: str | None, *, timeout_s: float = 3.0,
                 heartbeat_interval_s: float = 30.0, instance_name: str | None = None,
                 credentials: Credentials | None = None, tls: Tls = None) -> None:
        self.ip = local_ip()
        self.client_id = f"{self.ip}@{instance_name or os.getpid()}#{next(_instances)}"
        self.timeout_s = timeout_s
        self.pool = ConnectionPool(self._on_request, credentials, tls)
        self.routes = RouteTable(namesrv, self.pool, timeout_s)
        self.handlers: dict[int, RequestHandler] = {}
        self.heartbeat_data: Callable[[], HeartbeatData] = lambda: HeartbeatData(self.client_id)
        self._heartbeat_interval_s = heartbeat_interval_s
        self._tasks: list[asyncio.Task[None]] = []
        self.routes.on_new_broker = self._greet

    def _greet(self, addr: str) -> None:
        self._tasks.append(asyncio.create_task(self._heartbeat_to(addr)))

    def _on_request(self, conn: Connection, command: RemotingCommand) -> None:
        handler = self.handlers.get(command.code)
        if handler is not None:
            handler(conn, command)
        elif not command.is_oneway:
            conn.respond(make_response(command, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f"request code {command.code} not supported by this client"))

    async def start(self) -> None:
        self._tasks += [asyncio.create_task(self._every(ROUTE_REFRESH_S, self.routes.refresh)),
                        asyncio.create_task(self._every(self._heartbeat_interval_s, self.heartbeat))]

    def spawn(self, interval_s: float, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` every `interval_s` until `close` (owned here, like the refresh)."""
        self._tasks.append(asyncio.create_task(self._every(interval_s, job)))

    async def _every(self, interval_s: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except ClientError as exc:
                log.warning("%s: %s", getattr(job, "__name__", job), exc)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.pool.close()

    async def invoke(self, addr: str, request: RemotingCommand,
                     timeout_s: float | None = None) -> RemotingCommand:
        conn = await self.pool.get(addr)
        return await conn.invoke(request, timeout_s or self.timeout_s)

    async def invoke_ok(self, addr: str, request: RemotingCommand, what: str,
                        timeout_s: float | None = None) -> RemotingCommand:
        """`invoke`, raising ClientError unless the answer is SUCCESS."""
        response = await self.invoke(addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(f"{what}: {response.remark or 'refused'}", response.code)
        return response

    async def heartbeat(self) -> None:
        """Send the heartbeat (producer and consumer groups, subscriptions) to every
        broker read from (the masters, and a slave of a group whose master is gone, which
        then answers the group's consumer list)."""
        await asyncio.gather(*(self._heartbeat_to(addr) for addr in set(self.routes.readers.values())))

    async def _heartbeat_to(self, addr: str) -> None:
        try:
            await self.invoke_ok(addr, RemotingCommand(RequestCode.HEART_BEAT,
                                                       body=encode_body(self.heartbeat_data())),
                                 "heartbeat")
        except ClientError as exc:
            log.warning("heartbeat to %s failed: %s", addr, exc)

    async def unregister(self, producer_group: str | None = None,
                         consumer_group: str | None = None) -> None:
        fields = {"clientID": self.client_id}
        if producer_group:
            fields["producerGroup"] = producer_group
        if consumer_group:
            fields["consumerGroup"] = consumer_group
        for addr in set(self.routes.readers.values()):
            with contextlib.suppress(ClientError):
                await self.invoke(addr, RemotingCommand(RequestCode.UNREGISTER_CLIENT,
                                                        ext_fields=dict(fields)))
