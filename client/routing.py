"""Topic routes from the name servers, and the queues they make.

A `RouteTable` asks the name servers (`NAMESRV_ADDR` when no address is given; several
separated by ';', tried in turn) for a topic's route, keeps it, and refreshes every known
topic every 30 s so that brokers joining or leaving are noticed. It turns a route into
the queues a producer writes (`publish_queues`) and a consumer reads
(`subscribe_queues`), and names each broker's master address (`broker_addr`: sends,
transactions, locks) and the address to read from (`read_addr`: the master, else a slave,
as RocketMQ's `findBrokerAddressInSubscribe`, so consumers go on reading a broker group
whose master is gone). It never sends messages.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketport.protocols.remoting.bodies import (
    BodyError,
    ClusterInfo,
    MessageQueue,
    QueueData,
    TopicRouteData,
    decode_body,
)

from .errors import ClientError
from .transport import ConnectionPool

AUTO_CREATE_TOPIC = "TBW102"  # a new topic's sends borrow this route; the broker creates it
PERM_WRITE = 0x2
PERM_READ = 0x4
MASTER_ID = 0
NEW_TOPIC_QUEUE_NUMS = 4  # a new topic's queues when no TBW102 route says (producers' default)
ROUTE_REFRESH_S = 30.0


def namesrv_addrs(namesrv: str | None) -> list[str]:
    text = namesrv or os.environ.get("NAMESRV_ADDR", "")
    addrs = [a.strip() for a in text.split(";") if a.strip()]
    if not addrs:
        raise ClientError("no name server: pass namesrv='host:port' or set NAMESRV_ADDR")
    return addrs


def queue_order(mq: MessageQueue) -> tuple[str, str, int]:
    """The order every client of a group sorts queues in before allocating them."""
    return mq.topic, mq.broker_name, mq.queue_id


class RouteTable:
    def __init__(self, namesrv: str | None, pool: ConnectionPool, timeout_s: float = 3.0) -> None:
        self.addrs = namesrv_addrs(namesrv)
        self._start = random.randrange(len(self.addrs))
        self._pool = pool
        self._timeout_s = timeout_s
        self.routes: dict[str, TopicRouteData] = {}
        self.brokers: dict[str, str] = {}  # broker name -> master address
        self.readers: dict[str, str] = {}  # broker name -> master address, else a slave's
        self._publish: dict[str, list[MessageQueue]] = {}
        # told of each master address seen for the first time (the runtime sends it a
        # heartbeat at once, so the broker knows this client before its first request)
        self.on_new_broker: Callable[[str], None] = lambda addr: None

    async def invoke(self, request: RemotingCommand) -> RemotingCommand:
        """Send to the name servers in turn until one answers."""
        error: ClientError | None = None
        for i in range(len(self.addrs)):
            addr = self.addrs[(self._start + i) % len(self.addrs)]
            try:
                conn = await self._pool.get(addr)
                return await conn.invoke(RemotingCommand(request.code, ext_fields=request.ext_fields,
                                                         body=request.body), self._timeout_s)
            except ClientError as exc:
                error = exc
                self._start = (self._start + 1) % len(self.addrs)
        raise error  # type: ignore[misc]

    async def fetch(self, topic: str) -> TopicRouteData | None:
        """The name servers' route for `topic`, kept; None when no broker serves it."""
        response = await self.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                     ext_fields={"topic": topic}))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(response.remark or "route lookup failed", response.code)
        try:
            route = decode_body(TopicRouteData, response.body)
        except BodyError as exc:
            raise ClientError(f"bad route for {topic}: {exc}") from None
        self.routes[topic] = route
        self._publish.pop(topic, None)
        for broker in route.broker_datas:
            addrs = broker.broker_addrs
            master = addrs.get(MASTER_ID)
            reader = master or (addrs[min(addrs)] if addrs else None)
            if master is None:  # gone from the route: no sends to it, reads from a slave
                self.brokers.pop(broker.broker_name, None)
            elif self.brokers.get(broker.broker_name) != master:
                self.brokers[broker.broker_name] = master
            if reader is None:
                self.readers.pop(broker.broker_name, None)
            elif self.readers.get(broker.broker_name) != reader:
                self.readers[broker.broker_name] = reader
                self.on_new_broker(reader)
        return route

    async def refresh(self) -> None:
        for topic in list(self.routes):
            try:
                await self.fetch(topic)
            except ClientError:
                pass  # keep the last good route; the next refresh tries again

    async def route(self, topic: str) -> TopicRouteData | None:
        route = self.routes.get(topic)
        return route if route is not None else await self.fetch(topic)

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues of `topic`, by broker name then queue id; a topic no broker
        knows yet borrows TBW102's queue count (the broker creates it on first send)."""
        queues = self._publish.get(topic)
        if queues is not None:
            return queues
        route = await self.route(topic)
        source = route if route is not None else await self.fetch(AUTO_CREATE_TOPIC)
        if source is None:  # a standalone name server publishes no TBW102: every master
            source = await self._every_master()
        queues = [MessageQueue(topic, qd.broker_name, i)
                  for qd in sorted(source.queue_datas, key=lambda q: q.broker_name)
                  if qd.perm & PERM_WRITE and qd.broker_name in self.brokers
                  for i in range(qd.write_queue_nums)]
        if route is not None:  # a borrowed route is asked again next time
            self._publish[topic] = queues
        if not queues:
            raise ClientError(f"no writable queue for topic {topic}")
        return queues

    async def _every_master(self) -> TopicRouteData:
        """A route over every master the name servers know, with the queue count a new
        topic gets; the brokers decide whether to create the topic on the first send."""
        response = await self.invoke(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO))
        try:
            info = decode_body(ClusterInfo, response.body)
        except BodyError as exc:
            raise ClientError(f"bad cluster info: {exc}") from None
        datas = [d for _, d in sorted(info.broker_addr_table.items()) if MASTER_ID in d.broker_addrs]
        for data in datas:
            self.brokers.setdefault(data.broker_name, data.broker_addrs[MASTER_ID])
            self.readers.setdefault(data.broker_name, data.broker_addrs[MASTER_ID])
        return TopicRouteData([QueueData(d.broker_name, NEW_TOPIC_QUEUE_NUMS, NEW_TOPIC_QUEUE_NUMS)
                               for d in datas], datas)

    async def subscribe_queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        route = await self.fetch(topic) if refresh else await self.route(topic)
        if route is None:
            raise ClientError(f"topic {topic} does not exist", ResponseCode.TOPIC_NOT_EXIST)
        return sorted((MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                       if qd.perm & PERM_READ and qd.broker_name in self.readers
                       for i in range(qd.read_queue_nums)), key=queue_order)

    def broker_addr(self, broker_name: str) -> str:
        addr = self.brokers.get(broker_name)
        if addr is None:
            raise ClientError(f"no master address for broker {broker_name}")
        return addr

    def read_addr(self, broker_name: str) -> str:
        """Where to pull from and keep offsets: the master, else a slave of the group."""
        addr = self.readers.get(broker_name)
        if addr is None:
            raise ClientError(f"no address for broker {broker_name}")
        return addr
