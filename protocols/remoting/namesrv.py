"""Name-server handlers: topic routes, cluster info and broker registration.

Clients ask a name server which broker serves a topic (GET_ROUTEINFO_BY_TOPIC) before
talking to a broker. Two sources of truth answer them:
- `LocalRoutes`: the single-process default, where the broker answers for itself from its
  own topic table (routes for `%RETRY%{group}` and the auto-create topic TBW102 included,
  or clients' retries and first sends stop silently);
- `RouteRegistry`: `rocketport namesrv`, where brokers register (REGISTER_BROKER every
  30 s) and are forgotten when the connection they registered over closes (RocketMQ's
  BrokerHousekeepingService: a SIGKILLed broker leaves the routes at once) or 120 s after
  their last registration (a peer gone without a FIN); routes merge all brokers and clusters.
`BrokerRegistrar` is the broker side of the latter: it keeps one connection per name
server and registers on it. The handlers never touch the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rocketport.core.broker import Broker
from rocketport.core.facade.types import PERM_INHERIT, PERM_RW, PERM_WRITE

from . import bodies, headers
from .client import RemotingClient, RemotingClientError, request
from .codes import RequestCode, ResponseCode
from .command import Buffer, RemotingCommand, make_response
from .headers import decode_header, encode_header
from .group_peers import learn_peers
from .kv_config import ORDER_TOPIC_CONFIG, KVConfig, NamesrvSettings, parse_properties_body
from .session import RemotingSession

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
BROKER_CHANNEL_EXPIRED_S = 120.0
REGISTER_INTERVAL_S = 30.0
RETRY_PREFIX = "%RETRY%"


class RouteSource(Protocol):
    def topic_route(self, topic: str) -> bodies.TopicRouteData | None: ...
    def cluster_info(self) -> bodies.ClusterInfo: ...
    def topic_list(self) -> list[str]: ...


class LocalRoutes:
    """Routes of the one broker in this process, read from its topic table."""

    def __init__(self, broker: Broker, broker_addr: Callable[[], str]) -> None:
        self.broker = broker
        self.broker_addr = broker_addr

    def _broker_data(self) -> bodies.BrokerData:
        c = self.broker.config
        return bodies.BrokerData(c.broker_cluster_name, c.broker_name, {c.broker_id: self.broker_addr()})

    def topic_route(self, topic: str) -> bodies.TopicRouteData | None:
        c = self.broker.config
        cfg = self.broker.get_topic(topic)
        if cfg is None and topic.startswith(RETRY_PREFIX):
            cfg = self.broker.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        if cfg is not None:
            queue = bodies.QueueData(c.broker_name, cfg.read_queue_nums, cfg.write_queue_nums,
                                     cfg.perm, cfg.topic_sys_flag)
        elif topic == AUTO_CREATE_TOPIC_KEY_TOPIC and c.auto_create_topic_enable:
            n = c.default_topic_queue_nums
            queue = bodies.QueueData(c.broker_name, n, n, PERM_RW | PERM_INHERIT, 0)
        else:
            return None
        return bodies.TopicRouteData([queue], [self._broker_data()])

    def cluster_info(self) -> bodies.ClusterInfo:
        c = self.broker.config
        return bodies.ClusterInfo({c.broker_name: self._broker_data()},
                                  {c.broker_cluster_name: [c.broker_name]})

    def topic_list(self) -> list[str]:
        return self.broker.topic_names()


@dataclass(slots=True)
class _LiveBroker:
    cluster: str
    broker_name: str
    broker_id: int
    last_update: float
    topics: dict[str, bodies.TopicConfig] = field(default_factory=dict)
    ha_server_addr: str = ""  # where its slaves replicate from (a master's)
    channel: object = None  # the connection it registered over: its close forgets the broker
    data_version: tuple[int, int] | None = None  # its topic table's (timestamp, counter)


class RouteRegistry:
    """What registered brokers reported, merged; entries expire without re-registration."""

    def __init__(self, expiry_s: float = BROKER_CHANNEL_EXPIRED_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._brokers: dict[str, _LiveBroker] = {}  # broker address -> latest registration
        self._expiry_s = expiry_s
        self._clock = clock

    def register(self, addr: str, cluster: str, broker_name: str, broker_id: int,
                 topics: dict[str, bodies.TopicConfig], ha_server_addr: str = "",
                 channel: object = None, data_version: tuple[int, int] | None = None) -> tuple[str, str]:
        """Record a registration made over ``channel``; (master address, master's HA
        address) of its broker name, as RocketMQ's RouteInfoManager answers a slave ("" for a
        master, or when the master has not registered). A registration whose
        ``data_version`` is the one registered last keeps the topics registered then (as
        RocketMQ's isBrokerTopicConfigChanged: the table is read only when it changed)."""
        known = self._brokers.get(addr)
        if known is not None and data_version is not None and known.data_version == data_version:
            topics = known.topics
        for other, b in list(self._brokers.items()):  # a broker's id changed (a failover)
            if other != addr and b.broker_name == broker_name and b.broker_id == broker_id:
                log.info("broker %s replaces %s as %s/%d", addr, other, broker_name, broker_id)
                del self._brokers[other]
        self._brokers[addr] = _LiveBroker(cluster, broker_name, broker_id, self._clock(), topics,
                                          ha_server_addr, channel, data_version)
        if broker_id == 0:
            return "", ""
        for master_addr, b in self._brokers.items():
            if b.broker_name == broker_name and b.broker_id == 0:
                return master_addr, b.ha_server_addr
        return "", ""

    def unregister(self, addr: str) -> None:
        self._brokers.pop(addr, None)

    def data_version_changed(self, addr: str, data_version: tuple[int, int]) -> bool:
        """QUERY_DATA_VERSION: whether the broker at ``addr`` must register its topic table
        (unknown here, or registered another version); when not, this refreshes its
        liveness as a registration would (RocketMQ's queryBrokerTopicConfig)."""
        known = self._brokers.get(addr)
        if known is None or known.data_version != data_version:
            return True
        known.last_update = self._clock()
        return False

    def channel_closed(self, channel: object) -> list[str]:
        """Forget the brokers whose latest registration came over ``channel`` (RocketMQ's
        onChannelDestroy); one that registered again over another connection stays."""
        gone = [a for a, b in self._brokers.items() if b.channel is not None and b.channel is channel]
        for addr in gone:
            log.warning("broker %s dropped: its name-server connection closed", addr)
            del self._brokers[addr]
        return gone

    def scan_expired(self) -> list[str]:
        now = self._clock()
        gone = [a for a, b in self._brokers.items() if now - b.last_update > self._expiry_s]
        for addr in gone:
            log.warning("broker %s expired (no registration for %.0f s)", addr, self._expiry_s)
            del self._brokers[addr]
        return gone

    def _broker_datas(self) -> dict[str, bodies.BrokerData]:
        out: dict[str, bodies.BrokerData] = {}
        for addr, b in sorted(self._brokers.items()):
            data = out.setdefault(b.broker_name, bodies.BrokerData(b.cluster, b.broker_name))
            data.broker_addrs[b.broker_id] = addr
        return out

    def topic_route(self, topic: str) -> bodies.TopicRouteData | None:
        queues: dict[str, bodies.QueueData] = {}
        for b in sorted(self._brokers.values(), key=lambda b: b.broker_id):
            cfg = b.topics.get(topic)
            if cfg is not None and b.broker_name not in queues:  # the master's view wins
                queues[b.broker_name] = bodies.QueueData(b.broker_name, cfg.read_queue_nums,
                                                         cfg.write_queue_nums, cfg.perm,
                                                         cfg.topic_sys_flag)
        if not queues:
            return None
        datas = self._broker_datas()
        return bodies.TopicRouteData([queues[n] for n in sorted(queues)],
                                     [datas[n] for n in sorted(queues)])

    def cluster_info(self) -> bodies.ClusterInfo:
        datas = self._broker_datas()
        clusters: dict[str, list[str]] = {}
        for name, data in datas.items():
            names = clusters.setdefault(data.cluster, [])
            if name not in names:
                names.append(name)
        return bodies.ClusterInfo(datas, clusters)

    def topic_list(self) -> list[str]:
        return sorted({t for b in self._brokers.values() for t in b.topics})


class NameServerHandlers:
    """Answers name-server requests from a `RouteSource` (and registrations for a registry),
    with the operator's KV config, settings and write-perm wipes (mqadmin's name-server verbs)."""

    lane = None  # nothing dominates a name server's requests

    def __init__(self, routes: RouteSource, kv: KVConfig | None = None,
                 settings: NamesrvSettings | None = None) -> None:
        self.routes = routes
        self.kv = kv or KVConfig(None)
        self.settings = settings or NamesrvSettings(0, "")
        self.wiped: set[str] = set()  # broker names whose queues routes show read-only
        self._expiry: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if isinstance(self.routes, RouteRegistry):
            self._expiry = asyncio.create_task(self._expire(self.routes), name="namesrv-expiry")

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
            self._expiry = None

    @staticmethod
    async def _expire(registry: RouteRegistry) -> None:
        while True:
            await asyncio.sleep(10)
            registry.scan_expired()

    def session_closed(self, session: RemotingSession) -> None:
        """A broker's registration connection closed: its routes go (a killed master's
        clients turn to its slave now, not after the 120 s expiry)."""
        if isinstance(self.routes, RouteRegistry):
            self.routes.channel_closed(session)

    def handle_now(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> list[Buffer] | None:
        """Route lookups are rare: every request takes `handle`."""
        return None

    async def handle(self, session: RemotingSession, req: RemotingCommand) -> RemotingCommand:
        code = req.code
        if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            h = decode_header(headers.GetRouteInfoRequestHeader, req.ext_fields)
            route = self._route(h.topic)
            if route is None:
                return make_response(req, ResponseCode.TOPIC_NOT_EXIST,
                                     f"No topic route info in name server for the topic: {h.topic}")
            return make_response(req, ResponseCode.SUCCESS, body=bodies.encode_body(route))
        if code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return make_response(req, ResponseCode.SUCCESS,
                                 body=bodies.encode_body(self.routes.cluster_info()))
        if code in (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_TOPICS_BY_CLUSTER):
            return make_response(req, ResponseCode.SUCCESS,
                                 body=bodies.encode_body(bodies.TopicList(self.routes.topic_list())))
        operated = self._operate(req)
        if operated is not None:
            return operated
        if isinstance(self.routes, RouteRegistry):
            if code == RequestCode.REGISTER_BROKER:
                return self._register(req, self.routes, session)
            if code == RequestCode.UNREGISTER_BROKER:
                h = decode_header(headers.UnRegisterBrokerRequestHeader, req.ext_fields)
                self.routes.unregister(h.broker_addr)
                return make_response(req, ResponseCode.SUCCESS)
            if code == RequestCode.QUERY_DATA_VERSION:
                h = decode_header(headers.QueryDataVersionRequestHeader, req.ext_fields)
                version = bodies.decode_body(bodies.DataVersion, req.body) if req.body else bodies.DataVersion()
                changed = self.routes.data_version_changed(h.broker_addr, (version.timestamp, version.counter))
                return make_response(req, ResponseCode.SUCCESS, ext_fields=encode_header(
                    headers.QueryDataVersionResponseHeader(changed=changed)))
        return make_response(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                             f"request type {code} not supported")

    def _route(self, topic: str) -> bodies.TopicRouteData | None:
        """The route with wiped brokers' queues read-only and, with orderMessageEnable, the
        topic's ordered-queue layout (ORDER_TOPIC_CONFIG), as RocketMQ's name server serves it."""
        route = self.routes.topic_route(topic)
        if route is None:
            return None
        for queue in route.queue_datas:
            if queue.broker_name in self.wiped:
                queue.perm &= ~PERM_WRITE
        if self.settings.order_message_enable:
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic)
        return route

    def _broker_topics(self, broker_name: str) -> int:
        return sum(1 for t in self.routes.topic_list()
                   if (r := self.routes.topic_route(t)) and any(q.broker_name == broker_name
                                                                 for q in r.queue_datas))

    def _operate(self, req: RemotingCommand) -> RemotingCommand | None:
        """The operator's requests (mqadmin): KV config, settings, write perm; else None."""
        code = req.code
        if code in (RequestCode.PUT_KV_CONFIG, RequestCode.GET_KV_CONFIG, RequestCode.DELETE_KV_CONFIG):
            h = decode_header(headers.KVConfigRequestHeader, req.ext_fields)
            if code == RequestCode.PUT_KV_CONFIG:
                if h.value is None:
                    return make_response(req, ResponseCode.SYSTEM_ERROR, "PUT_KV_CONFIG needs a value")
                self.kv.put(h.namespace, h.key, h.value)
                return make_response(req, ResponseCode.SUCCESS)
            if code == RequestCode.DELETE_KV_CONFIG:
                self.kv.delete(h.namespace, h.key)
                return make_response(req, ResponseCode.SUCCESS)
            value = self.kv.get(h.namespace, h.key)
            if value is None:
                return make_response(req, ResponseCode.QUERY_NOT_FOUND,
                                     f"No config item, Namespace: {h.namespace} Key: {h.key}")
            return make_response(req, ResponseCode.SUCCESS,
                                 ext_fields=encode_header(headers.GetKVConfigResponseHeader(value)))
        if code == RequestCode.GET_KVLIST_BY_NAMESPACE:
            h = decode_header(headers.GetKVListByNamespaceRequestHeader, req.ext_fields)
            pairs = self.kv.namespace(h.namespace)
            if not pairs:
                return make_response(req, ResponseCode.QUERY_NOT_FOUND,
                                     f"No config item, Namespace: {h.namespace}")
            return make_response(req, ResponseCode.SUCCESS, body=bodies.encode_body(bodies.KVTable(pairs)))
        if code == RequestCode.GET_NAMESRV_CONFIG:
            text = "".join(f"{k}={v}\n" for k, v in self.settings.as_properties().items())
            return make_response(req, ResponseCode.SUCCESS, body=text.encode())
        if code == RequestCode.UPDATE_NAMESRV_CONFIG:
            problem = self.settings.update(parse_properties_body(bytes(req.body or b"")))
            if problem:
                return make_response(req, ResponseCode.SYSTEM_ERROR, problem)
            return make_response(req, ResponseCode.SUCCESS)
        if code in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
            h = decode_header(headers.WriteOfBrokerRequestHeader, req.ext_fields)
            count = self._broker_topics(h.broker_name)
            if code == RequestCode.WIPE_WRITE_PERM_OF_BROKER:
                self.wiped.add(h.broker_name)
                answer: object = headers.WipeWritePermOfBrokerResponseHeader(count)
            else:
                self.wiped.discard(h.broker_name)
                answer = headers.AddWritePermOfBrokerResponseHeader(count)
            log.info("write permission of broker %s %s (%d topics)", h.broker_name,
                     "wiped" if code == RequestCode.WIPE_WRITE_PERM_OF_BROKER else "restored", count)
            return make_response(req, ResponseCode.SUCCESS, ext_fields=encode_header(answer))
        return None

    @staticmethod
    def _register(req: RemotingCommand, registry: RouteRegistry, channel: object) -> RemotingCommand:
        h = decode_header(headers.RegisterBrokerRequestHeader, req.ext_fields)
        if h.compressed:
            return make_response(req, ResponseCode.SYSTEM_ERROR,
                                 "compressed registration bodies are not supported")
        body = bodies.decode_body(bodies.RegisterBrokerBody, req.body) if req.body else bodies.RegisterBrokerBody()
        wrapper = body.topic_config_serialize_wrapper
        version = wrapper.data_version
        master_addr, ha_addr = registry.register(h.broker_addr, h.cluster_name, h.broker_name, h.broker_id,
                                                 wrapper.topic_config_table, h.ha_server_addr or "", channel,
                                                 (version.timestamp, version.counter) if version.timestamp else None)
        return make_response(req, ResponseCode.SUCCESS, ext_fields=encode_header(
                                 headers.RegisterBrokerResponseHeader(ha_server_addr=ha_addr,
                                                                      master_addr=master_addr)),
                             body=bodies.encode_body(bodies.KVTable()))


class BrokerRegistrar:
    """Registers this broker with every configured name server, every 30 s, over one kept
    connection per name server (its close is how the name server learns the broker died).

    The topic table (megabytes with 100,000 queues) is sent only when the name server does
    not have it: as RocketMQ's needRegister, a round where nothing changed since the last
    registration over the same connection asks QUERY_DATA_VERSION with the table's
    dataVersion (the broker's start time and the table's change counter), which refreshes
    the broker's liveness when the name server holds that version, and registers in full
    only when it answers changed. ``register_soon`` (a role or table change) registers in
    full."""

    def __init__(self, broker: Broker, broker_addr: Callable[[], str], namesrv_addrs: list[str],
                 interval_s: float = REGISTER_INTERVAL_S,
                 on_master: Callable[[str], None] | None = None) -> None:
        """``on_master``: a slave's register answer named its master's remoting address."""
        self.broker = broker
        self.on_master = on_master
        self._soon = asyncio.Event()
        broker.ha.on_slave_connected = self.register_soon  # a new slave: learn the group again
        # a topic created or changed: routes list it now, not at the next interval (as
        # RocketMQ's registerIncrementBrokerData); a slave's table follows its master's
        broker.topics.listeners.append(lambda _changes: self.register_soon())
        broker.role_listeners.append(self.register_soon)  # elected or demoted: routes switch now
        self.broker_addr = broker_addr
        self.namesrv_addrs = namesrv_addrs
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._clients: dict[str, RemotingClient] = {}  # name server address -> kept connection
        self._started_ms = int(time.time() * 1000)  # a restarted broker's table is another version
        # name server address -> (connection, what was registered in full over it)
        self._registered: dict[str, tuple[RemotingClient, tuple]] = {}

    def _request(self, code: RequestCode, body: bytes = b"") -> RemotingCommand:
        c = self.broker.config
        return request(code, {"brokerName": c.broker_name, "brokerAddr": self.broker_addr(),
                              "clusterName": c.broker_cluster_name, "haServerAddr": self._ha_addr(),
                              "brokerId": str(self.broker.route_broker_id), "compressed": "false"}, body)

    def _ha_addr(self) -> str:
        """This master's HA address (brokerIP2, else brokerIP1), "" without an HA port."""
        c = self.broker.config
        port = self.broker.ha.port
        return f"{c.broker_ip2 or c.broker_ip1}:{port}" if port else ""

    def _data_version(self) -> bodies.DataVersion:
        return bodies.DataVersion(self._started_ms, self.broker.topics.data_version)

    def _registration(self) -> tuple:
        """What a full registration tells the name server beyond the heartbeat."""
        v = self._data_version()
        return (v.timestamp, v.counter, self.broker.route_broker_id, self.broker_addr(), self._ha_addr())

    def _body(self) -> bytes:
        table = {}
        for name in self.broker.topic_names():
            cfg = self.broker.get_topic(name)
            if cfg is not None:
                table[name] = bodies.TopicConfig(name, cfg.read_queue_nums, cfg.write_queue_nums,
                                                 cfg.perm, cfg.topic_filter_type,
                                                 cfg.topic_sys_flag, cfg.order)
        wrapper = bodies.TopicConfigSerializeWrapper(table, self._data_version())
        return bodies.encode_body(bodies.RegisterBrokerBody(wrapper))

    async def register_once(self, force: bool = True) -> None:
        """Register with every name server: in full with ``force``, else only where the
        name server does not hold this broker's current registration."""
        await self._register_all(force)
        if self.namesrv_addrs:  # the group's members as the name server now lists them (Kafka)
            await learn_peers(self.broker, self.namesrv_addrs[0])

    async def _register_all(self, force: bool) -> None:
        body: bytes | None = None
        registration = self._registration()
        for addr in self.namesrv_addrs:
            try:
                client = await self._client(addr)
                if not force and self._registered.get(addr) == (client, registration) \
                        and not await self._changed(client):
                    continue  # the name server has it: liveness refreshed by the query
                self._registered.pop(addr, None)
                if body is None:
                    body = self._body()
                resp = await client.invoke(self._request(RequestCode.REGISTER_BROKER, body))
                if resp.code != ResponseCode.SUCCESS:
                    log.warning("name server %s refused registration: %s", addr, resp.remark)
                    continue
                self._registered[addr] = (client, registration)
                if self.broker.config.is_slave:  # as RocketMQ's slave: the master's addresses
                    fields = resp.ext_fields or {}
                    self.broker.ha.master_learnt(fields.get("haServerAddr") or "")
                    if self.on_master is not None and fields.get("masterAddr"):
                        self.on_master(fields["masterAddr"])
            except (OSError, asyncio.TimeoutError, RemotingClientError) as exc:
                log.warning("registering with name server %s failed: %s", addr, exc)
                await self._drop(addr)

    async def _changed(self, client: RemotingClient) -> bool:
        """QUERY_DATA_VERSION: whether the name server wants the table again."""
        resp = await client.invoke(self._request(RequestCode.QUERY_DATA_VERSION,
                                                 bodies.encode_body(self._data_version())))
        return resp.code != ResponseCode.SUCCESS or (resp.ext_fields or {}).get("changed") != "false"

    async def _client(self, addr: str) -> RemotingClient:
        """The kept connection to ``addr``, opened again if it closed (a restarted name
        server: registering soon puts this broker back in its routes)."""
        client = self._clients.get(addr)
        if client is not None and not client.closed:
            return client
        if client is not None:
            await self._drop(addr)
        client = await RemotingClient.connect(addr)
        client.on_close(lambda: self._lost(addr, client))
        self._clients[addr] = client
        return client

    def _lost(self, addr: str, client: RemotingClient) -> None:
        """The name server closed a kept connection: register again now. One this side
        dropped is no longer listed and asks nothing (no loop against a refusing server)."""
        if self._clients.get(addr) is client:
            self.register_soon()

    async def _drop(self, addr: str) -> None:
        client = self._clients.pop(addr, None)
        if client is not None:
            await client.close()

    def register_soon(self) -> None:
        """Register now instead of at the next interval (a slave's topic table changed)."""
        self._soon.set()

    async def _loop(self) -> None:
        force = True
        while True:
            self._soon.clear()
            await self.register_once(force)
            ha = self.broker.ha
            # a slave that has not learnt its master's HA address asks again soon
            waiting = ha.slave is not None and not ha.slave.master_address
            try:
                await asyncio.wait_for(self._soon.wait(), min(self.interval_s, 1.0) if waiting else self.interval_s)
                force = True
            except asyncio.TimeoutError:
                force = waiting

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="namesrv-registration")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        for addr in self.namesrv_addrs:
            try:
                client = self._clients.get(addr)
                if client is None or client.closed:
                    client = await RemotingClient.connect(addr, 2.0)
                    self._clients[addr] = client
                await client.invoke(self._request(RequestCode.UNREGISTER_BROKER), 2.0)
            except (OSError, asyncio.TimeoutError, RemotingClientError):
                pass
        for addr in list(self._clients):
            await self._drop(addr)
