"""A live broker with every TLS listener on, on free loopback ports (tlsPort -1: the OS
picks them when binding), and its test PKI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketport.core.config import FREE_PORT, BrokerConfig, ProtocolConfig
from rocketport.protocols import tls
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.tls.certs import Pki, make_pki

HANDSHAKE_TIMEOUT_S = 1.0  # the stalled-handshake test waits this long, not the default 10 s


@pytest.fixture
def pki(tmp_path) -> Pki:
    return make_pki(str(tmp_path / "pki"))


def tls_config(store: str, pki: Pki, **overrides) -> BrokerConfig:
    """Every protocol with its plaintext port and its TLS port; remoting permissive."""
    values = dict(
        store_path_root_dir=store, mapped_file_size_commit_log=1 << 20, listen_port=0,
        namesrv=ProtocolConfig(True, 0),
        kafka=ProtocolConfig(True, 0, tls_port=FREE_PORT),
        amqp=ProtocolConfig(True, 0, tls_port=FREE_PORT, default_user="guest", default_pass="guest"),
        stomp=ProtocolConfig(True, 0, tls_port=FREE_PORT, wss_port=FREE_PORT),
        http=ProtocolConfig(True, 0, tls_port=FREE_PORT),
        tls_server_mode="permissive", tls_server_cert_path=pki.server_cert,
        tls_server_key_path=pki.server_key, tls_server_trust_cert_path=pki.ca)
    values.update(overrides)
    return BrokerConfig(**values)


@pytest.fixture(params=["asyncio", "uvloop"])
def tls_broker(request, tmp_path, pki, monkeypatch) -> Iterator[LiveBroker]:
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", HANDSHAKE_TIMEOUT_S)
    live = start_live_broker(tls_config(str(tmp_path / "store"), pki), request.param)
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def mtls_broker(tmp_path, pki, monkeypatch) -> Iterator[LiveBroker]:
    """Client certificates required (tls.server.need.client.auth=require)."""
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", HANDSHAKE_TIMEOUT_S)
    live = start_live_broker(tls_config(str(tmp_path / "store"), pki, tls_server_need_client_auth="require",
                                        tls_server_mode="enforcing"))
    try:
        yield live
    finally:
        live.stop()
