"""A live broker with every TLS listener on, on free loopback ports, and its test PKI."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.protocols import tls
from rocketport.protocols.listener import ListenError
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.tls.certs import Pki, make_pki

HANDSHAKE_TIMEOUT_S = 1.0  # the stalled-handshake test waits this long, not the default 10 s


def _started(config_for: Callable[[str], BrokerConfig], tmp_path: Path, loop_kind: str) -> LiveBroker:
    """A live broker on the TLS ports ``free_port`` picked; picked again (and a fresh store)
    when another process took one between the pick and the bind (the keys' 0 means off, so
    the broker cannot pick them itself). At most three tries."""
    for attempt in range(2):
        try:
            return start_live_broker(config_for(str(tmp_path / f"store{attempt}")), loop_kind)
        except ListenError:
            continue  # a port was taken between the pick and the bind: pick them all again
    return start_live_broker(config_for(str(tmp_path / "store2")), loop_kind)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pki(tmp_path) -> Pki:
    return make_pki(str(tmp_path / "pki"))


def tls_config(store: str, pki: Pki, **overrides) -> BrokerConfig:
    """Every protocol with its plaintext port and its TLS port; remoting permissive."""
    values = dict(
        store_path_root_dir=store, mapped_file_size_commit_log=1 << 20, listen_port=0,
        namesrv=ProtocolConfig(True, 0),
        kafka=ProtocolConfig(True, 0, tls_port=free_port()),
        amqp=ProtocolConfig(True, 0, tls_port=free_port(), default_user="guest", default_pass="guest"),
        stomp=ProtocolConfig(True, 0, tls_port=free_port(), wss_port=free_port()),
        http=ProtocolConfig(True, 0, tls_port=free_port()),
        tls_server_mode="permissive", tls_server_cert_path=pki.server_cert,
        tls_server_key_path=pki.server_key, tls_server_trust_cert_path=pki.ca)
    values.update(overrides)
    return BrokerConfig(**values)


@pytest.fixture(params=["asyncio", "uvloop"])
def tls_broker(request, tmp_path, pki, monkeypatch) -> Iterator[LiveBroker]:
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", HANDSHAKE_TIMEOUT_S)
    live = _started(lambda store: tls_config(store, pki), tmp_path, request.param)
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def mtls_broker(tmp_path, pki, monkeypatch) -> Iterator[LiveBroker]:
    """Client certificates required (tls.server.need.client.auth=require)."""
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", HANDSHAKE_TIMEOUT_S)
    live = _started(lambda store: tls_config(store, pki, tls_server_need_client_auth="require",
                                             tls_server_mode="enforcing"), tmp_path, "asyncio")
    try:
        yield live
    finally:
        live.stop()
