"""Standalone name server: brokers register, routes merge, silent brokers expire."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import subprocess
import sys

from rocketport.client import ClientError
from rocketport.protocols.remoting import RemotingCommand, bodies
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.namesrv import NameServerHandlers, RouteRegistry
from rocketport.protocols.remoting.session import RemotingListener
from rocketport.server import BrokerServer

from tests.support.aio import run as run_async
from tests.support.remoting import free_port, remoting_client, request


def test_registry_merges_brokers_and_expires_silent_ones():
    now = [0.0]
    registry = RouteRegistry(expiry_s=120, clock=lambda: now[0])
    registry.register("10.0.0.1:10911", "c1", "broker-a", 0, {"T": bodies.TopicConfig("T", 4, 4)})
    registry.register("10.0.0.2:10911", "c2", "broker-b", 0, {"T": bodies.TopicConfig("T", 2, 2)})
    registry.register("10.0.0.3:10911", "c1", "broker-a", 1, {"T": bodies.TopicConfig("T", 4, 4)})
    route = registry.topic_route("T")
    assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 4), ("broker-b", 2)]
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.3:10911"}
    assert registry.cluster_info().cluster_addr_table == {"c1": ["broker-a"], "c2": ["broker-b"]}
    now[0] = 100
    registry.register("10.0.0.2:10911", "c2", "broker-b", 0, {"T": bodies.TopicConfig("T", 2, 2)})
    now[0] = 130
    assert sorted(registry.scan_expired()) == ["10.0.0.1:10911", "10.0.0.3:10911"]
    assert [q.broker_name for q in registry.topic_route("T").queue_datas] == ["broker-b"]
    assert registry.topic_route("Unknown") is None


def test_registry_forgets_a_broker_when_its_registration_connection_closes():
    registry = RouteRegistry()
    first, second, other = object(), object(), object()
    registry.register("10.0.0.1:10911", "c1", "broker-a", 0, {"T": bodies.TopicConfig("T", 4, 4)}, channel=first)
    registry.register("10.0.0.2:10911", "c1", "broker-a", 1, {"T": bodies.TopicConfig("T", 4, 4)}, channel=other)
    registry.register("10.0.0.1:10911", "c1", "broker-a", 0, {"T": bodies.TopicConfig("T", 4, 4)}, channel=second)
    assert registry.channel_closed(first) == []  # it registered again over another connection
    assert registry.channel_closed(second) == ["10.0.0.1:10911"]
    assert registry.topic_route("T").broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}


def test_broker_registers_with_standalone_name_server(remoting_config):
    async def main() -> None:
        handlers = NameServerHandlers(RouteRegistry())
        namesrv = RemotingListener(handlers, "127.0.0.1", 0)
        await handlers.start()
        await namesrv.start()
        # a master with namesrvAddr offers its HA port (listenPort + 1 unless set): a free one
        config = dataclasses.replace(remoting_config, namesrv_addr=f"127.0.0.1:{namesrv.port}",
                                     listen_port=free_port(), ha_listen_port=free_port())
        server = BrokerServer(config)
        await server.start()
        try:
            server.broker.create_topic("Registered", read_queue_nums=3, write_queue_nums=3)
            await server.front_ends["remoting"].registrar.register_once()
            async with remoting_client(f"127.0.0.1:{namesrv.port}") as client:
                resp = await client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Registered"}))
                assert resp.code == ResponseCode.SUCCESS
                route = bodies.decode_body(bodies.TopicRouteData, resp.body)
                assert route.queue_datas[0].write_queue_nums == 3
                assert route.broker_datas[0].broker_addrs[0] == server.front_ends["remoting"].broker_addr()
            registrar = server.front_ends["remoting"].registrar
            kept = registrar._clients[f"127.0.0.1:{namesrv.port}"]
            await registrar.register_once()  # the broker registers again on the connection it keeps
            assert registrar._clients[f"127.0.0.1:{namesrv.port}"] is kept and not kept.closed
            kept._writer.transport.abort()  # as a killed broker's socket: the name server forgets it
            for _ in range(100):
                async with remoting_client(f"127.0.0.1:{namesrv.port}") as client:
                    resp = await client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Registered"}))
                if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                    break
                await asyncio.sleep(0.05)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
            for _ in range(100):  # the broker sees its connection close and registers again at once
                async with remoting_client(f"127.0.0.1:{namesrv.port}") as client:
                    resp = await client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Registered"}))
                if resp.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.05)
            assert resp.code == ResponseCode.SUCCESS
        finally:
            await server.stop()  # unregisters
        async with remoting_client(f"127.0.0.1:{namesrv.port}") as client:
            resp = await client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Registered"}))
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        await namesrv.stop()
        await handlers.stop()

    run_async(asyncio.wait_for(main(), 60))


def test_rocketport_namesrv_command_serves_and_stops_on_sigterm():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rocketport", "namesrv", "--host", "127.0.0.1",
                             "-p", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        async def ask() -> RemotingCommand:
            for _ in range(100):
                try:
                    async with remoting_client(f"127.0.0.1:{port}") as client:
                        return await client.invoke(request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
                except ClientError:  # not listening yet
                    await asyncio.sleep(0.1)
            raise AssertionError("name server did not come up")

        resp = run_async(ask())
        assert resp.code == ResponseCode.SUCCESS
        assert bodies.decode_body(bodies.TopicList, resp.body).topic_list == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


class _RecordingHandlers(NameServerHandlers):
    """A name server that notes each request's code and body length."""

    def __init__(self) -> None:
        super().__init__(RouteRegistry())
        self.seen: list[tuple[int, int]] = []

    async def handle(self, session, req: RemotingCommand) -> RemotingCommand:
        if req.code in (RequestCode.REGISTER_BROKER, RequestCode.QUERY_DATA_VERSION):
            self.seen.append((req.code, len(req.body or b"")))
        return await super().handle(session, req)


def test_periodic_registration_sends_the_topic_table_only_when_it_changed(remoting_config):
    """As RocketMQ's needRegister: an unchanged table is not sent again (QUERY_DATA_VERSION
    keeps the broker alive), a changed one is, and a name server that lost the broker gets
    the whole table at the next round."""

    async def main() -> None:
        handlers = _RecordingHandlers()
        namesrv = RemotingListener(handlers, "127.0.0.1", 0)
        await handlers.start()
        await namesrv.start()
        config = dataclasses.replace(remoting_config, namesrv_addr=f"127.0.0.1:{namesrv.port}",
                                     listen_port=free_port(), ha_listen_port=free_port())
        server = BrokerServer(config)
        await server.start()
        registrar = server.front_ends["remoting"].registrar
        broker_addr = registrar.broker_addr()
        try:
            for i in range(200):
                server.broker.create_topic(f"Many{i}", read_queue_nums=4, write_queue_nums=4)
            await registrar.register_once()
            full = [n for code, n in handlers.seen if code == RequestCode.REGISTER_BROKER][-1]
            assert full > 200 * 50  # the table: 200 topics
            handlers.seen.clear()
            for _ in range(3):
                await registrar.register_once(force=False)
            assert handlers.seen and all(code == RequestCode.QUERY_DATA_VERSION and n < 200
                                         for code, n in handlers.seen), handlers.seen
            assert handlers.routes.topic_route("Many199") is not None  # still routed

            server.broker.create_topic("Late", read_queue_nums=2, write_queue_nums=2)
            handlers.seen.clear()
            await registrar.register_once(force=False)
            assert [code for code, _ in handlers.seen][-1] == RequestCode.REGISTER_BROKER
            assert handlers.routes.topic_route("Late").queue_datas[0].write_queue_nums == 2

            handlers.routes.unregister(broker_addr)  # as a name server that expired it
            handlers.seen.clear()
            await registrar.register_once(force=False)
            assert [code for code, _ in handlers.seen] == [RequestCode.QUERY_DATA_VERSION,
                                                         RequestCode.REGISTER_BROKER]
            assert handlers.routes.topic_route("Many0") is not None
        finally:
            await server.stop()
            await namesrv.stop()
            await handlers.stop()

    run_async(asyncio.wait_for(main(), 60))
