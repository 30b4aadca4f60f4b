"""The conf/ sample layouts (RocketMQ's distribution layouts with Rocketport's keys) load as
they are, pair each master with its slave by broker name, and start as docs/operations.md
says: a SYNC_MASTER and its slave from conf/2m-2s-sync answer a send SEND_OK (the slave found
its master through the name server). The ports and stores are moved to free ones with --set."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from rocketport.client import Message, Producer
from rocketport.client.message import SendStatus
from rocketport.config_file import load_config
from tests.ha.cluster import wait_for
from tests.ha.test_sync_master import in_sync
from tests.support.processes import REPO, RestartableBroker
from tests.support.remoting import free_port

LAYOUTS = {"2m-noslave": ("ASYNC_MASTER", 0), "2m-2s-async": ("ASYNC_MASTER", 1), "2m-2s-sync": ("SYNC_MASTER", 1)}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_layout_pairs_each_master_with_its_slaves(layout):
    role, slaves = LAYOUTS[layout]
    groups = defaultdict(dict)
    for path in sorted((REPO / "conf" / layout).glob("*.properties")):
        config = load_config(str(path), {"namesrvAddr": "127.0.0.1:9876"})
        assert not config.inert_keys, path
        groups[config.broker_name][config.broker_id] = config
    assert sorted(groups) == ["broker-a", "broker-b"]
    ports = set()
    for members in groups.values():
        assert members[0].broker_role == role and members[0].ha_listens
        assert sorted(members) == [0] + [1] * slaves
        for config in members.values():
            assert config.store_path_root_dir not in ports
            for port in (config.listen_port, config.kafka.port, config.amqp.port, config.stomp.port,
                         config.stomp.ws_port, config.http.port, config.ha_port if config.ha_listens else None):
                if port is not None:
                    assert port not in ports, (layout, port)
                    ports.add(port)
            ports.add(config.store_path_root_dir)


def test_the_sync_layout_starts_as_documented(tmp_path, namesrv):
    master_port = free_port()
    (tmp_path / "a").mkdir()
    (tmp_path / "a-s").mkdir()
    master = RestartableBroker(tmp_path / "a" / "store", f"namesrvAddr={namesrv}", f"listenPort={master_port}",
                               f"haListenPort={free_port()}", f"kafka.port={free_port()}",
                               conf="conf/2m-2s-sync/broker-a.properties")
    slave = RestartableBroker(tmp_path / "a-s" / "store", f"namesrvAddr={namesrv}", f"listenPort={free_port()}",
                              f"kafka.port={free_port()}", conf="conf/2m-2s-sync/broker-a-s.properties")
    master.start()
    slave.start()
    try:
        wait_for(lambda: in_sync(f"127.0.0.1:{master_port}"), what="broker-a's slave in sync")

        async def send() -> SendStatus:
            async with Producer(namesrv, "layout-producer") as producer:
                return (await producer.send(Message("LayoutTopic", b"hello"))).status
        assert asyncio.run(send()) is SendStatus.SEND_OK
    finally:
        slave.stop()
        master.stop()
