"""The other members of this broker's group (same brokerName), as Kafka's Metadata lists them:
their remoting addresses from a name server's cluster table, their own brokerId (the Kafka
node id a member keeps for life, whatever id routes list it under after an election) and
Kafka address from each one's configuration (GET_BROKER_CONFIG). Asked after each registration and when a slave connects
to this master; the result goes to `Broker.ha.set_peers`. A member that does not answer is
left out until the next round."""

from __future__ import annotations

import asyncio
import logging

from rocketport.core.broker import Broker

from . import bodies
from .client import RemotingClient, RemotingClientError
from .codes import RequestCode, ResponseCode
from .command import RemotingCommand

log = logging.getLogger(__name__)


async def learn_peers(broker: Broker, namesrv_addr: str) -> None:
    config = broker.config
    try:
        async with await RemotingClient.connect(namesrv_addr, 2.0) as client:
            resp = await client.invoke(RemotingCommand(code=int(RequestCode.GET_BROKER_CLUSTER_INFO)), 2.0)
        info = bodies.decode_body(bodies.ClusterInfo, resp.body)
    except (OSError, asyncio.TimeoutError, RemotingClientError, bodies.BodyError) as exc:
        log.debug("group peers: name server %s: %s", namesrv_addr, exc)
        return
    group = info.broker_addr_table.get(config.broker_name)
    if group is None:
        return
    peers: dict[int, tuple[str, int]] = {}
    for broker_id, addr in group.broker_addrs.items():
        if broker_id == broker.route_broker_id:
            continue
        member = await _kafka_member(addr)
        if member is not None:
            peers[member[0]] = member[1]
    broker.ha.set_peers(peers)


async def _kafka_member(addr: str) -> tuple[int, tuple[str, int]] | None:
    """A member's own brokerId and advertised Kafka (host, port), None when it serves no
    Kafka or has no fixed port."""
    try:
        async with await RemotingClient.connect(addr, 2.0) as client:
            resp = await client.invoke(RemotingCommand(code=int(RequestCode.GET_BROKER_CONFIG)), 2.0)
    except (OSError, asyncio.TimeoutError, RemotingClientError) as exc:
        log.debug("group peers: broker %s: %s", addr, exc)
        return None
    if resp.code != ResponseCode.SUCCESS:
        return None
    props = dict(line.partition("=")[::2] for line in bytes(resp.body).decode("utf-8", "replace").splitlines())
    port = int(props.get("kafka.port", "0") or 0)
    if props.get("kafka.enabled") != "true" or not port:
        return None
    host = props.get("kafka.host") or props.get("brokerIP1", "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = props.get("brokerIP1", "127.0.0.1")
    return int(props.get("brokerId", "0") or 0), (host, port)
