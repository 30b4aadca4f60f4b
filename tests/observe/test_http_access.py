"""Who may read the console and /api/: with aclEnable only the ACL's admin accounts (HTTP
basic auth; 401 for any refusal), without it only loopback clients unless http.allowRemote; /metrics stays open
to Prometheus. Live brokers read with urllib from 127.0.0.1 and from this machine's own
non-loopback address; the decision itself on requests with any peer."""

from __future__ import annotations

import base64
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from rocketport.core.broker import Broker
from rocketport.core.config import ProtocolConfig
from rocketport.protocols.http.access import HttpAccess, basic_credentials, is_loopback
from rocketport.protocols.http.session import Request
from tests.observe.metrics_support import TIMEOUT, all_protocols_config
from tests.support.live_broker import LiveBroker, start_live_broker

ACL = """\
accounts:
  - accessKey: alice
    secretKey: alice-secret
    defaultTopicPerm: PUB|SUB
  - accessKey: root
    secretKey: "r\u00f6\u00f6t:secret"
    admin: true
"""
ROOT = ("root", "r\u00f6\u00f6t:secret")  # a non-ASCII password with a colon in it


def _auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def fetch(host: str, port: int, path: str, authorization: str | None = None) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"http://{host}:{port}{path}")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def own_address() -> str:
    """This machine's non-loopback IPv4 address (the one a route out would use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: it only picks the route
        except OSError:
            pytest.skip("no non-loopback IPv4 address on this machine (the decision is tested below)")
        address = probe.getsockname()[0]
    if is_loopback(address):
        pytest.skip("no non-loopback IPv4 address on this machine (the decision is tested below)")
    return address


@pytest.fixture
def broker_with(tmp_path) -> Iterator:
    started: list[LiveBroker] = []

    def start(**overrides) -> LiveBroker:
        live = start_live_broker(all_protocols_config(str(tmp_path / f"store{len(started)}"), **overrides))
        started.append(live)
        return live
    try:
        yield start
    finally:
        for live in started:
            live.stop()


def test_acl_admin_accounts_log_in_with_basic_auth(broker_with, tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL, encoding="utf-8")
    live = broker_with(acl_enable=True, plain_acl_file=str(acl))
    host, port = live.endpoint("http")
    status, headers = fetch(host, port, "/")
    assert status == 401 and headers["www-authenticate"].startswith('Basic realm="Rocketport"')
    assert fetch(host, port, "/api/overview", _auth("root", "wrong"))[0] == 401
    assert fetch(host, port, "/api/overview", _auth("nobody", "x"))[0] == 401
    assert fetch(host, port, "/api/overview", _auth("alice", "alice-secret"))[0] == 401  # not an admin
    assert fetch(host, port, "/api/overview", "Basic !!not-base64")[0] == 401
    assert fetch(host, port, "/", _auth(*ROOT))[0] == 200
    assert fetch(host, port, "/console/main.js", _auth(*ROOT))[0] == 200
    assert fetch(host, port, "/api/overview", _auth(*ROOT))[0] == 200
    assert fetch(host, port, "/metrics")[0] == 200  # Prometheus scrapes without an account


def test_without_acl_only_loopback_clients_unless_allowed(broker_with):
    address = own_address()
    closed = broker_with(http=ProtocolConfig(True, 0, host="0.0.0.0"))
    port = closed.endpoint("http")[1]
    assert fetch("127.0.0.1", port, "/")[0] == 200
    assert fetch("127.0.0.1", port, "/api/overview")[0] == 200
    assert fetch(address, port, "/")[0] == 403
    assert fetch(address, port, "/api/overview")[0] == 403
    assert fetch(address, port, "/metrics")[0] == 200
    opened = broker_with(http=ProtocolConfig(True, 0, host="0.0.0.0", allow_remote=True))
    assert fetch(address, opened.endpoint("http")[1], "/api/overview")[0] == 200


def _request(peer: str, authorization: str | None = None) -> Request:
    headers = (("authorization", authorization),) if authorization is not None else ()
    return Request("GET", "/api/overview", headers, b"", (peer, 40000))


@pytest.mark.parametrize("peer, allowed", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("10.1.2.3", False), ("192.0.2.7", False), ("::ffff:10.1.2.3", False), ("2001:db8::1", False),
    ("fe80::1%eth0", False), ("not-an-address", False),
])
def test_the_loopback_rule(small_config, peer, allowed):
    access = HttpAccess(Broker(small_config))
    assert (access.refusal(_request(peer)) is None) is allowed
    small_config.http = ProtocolConfig(True, 0, allow_remote=True)
    assert HttpAccess(Broker(small_config)).refusal(_request(peer)) is None


@pytest.mark.parametrize("host, allowed", [
    ("127.0.0.1:5557", True), ("localhost", True), ("LOCALHOST:80", True), ("app.localhost:5557", True),
    ("[::1]:5557", True), ("::1", True), ("", True),
    ("rebound.example:5557", False), ("10.0.0.1", False), ("localhost.evil.example", False),
])
def test_the_host_rule_against_dns_rebinding(small_config, host, allowed):
    request = Request("GET", "/api/overview", (("host", host),), b"", ("127.0.0.1", 40000))
    assert (HttpAccess(Broker(small_config)).refusal(request) is None) is allowed


def test_the_acl_rule_holds_for_loopback_clients_too(small_config, tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL, encoding="utf-8")
    small_config.acl_enable, small_config.plain_acl_file = True, str(acl)
    access = HttpAccess(Broker(small_config))
    assert access.refusal(_request("127.0.0.1")).status == 401
    assert access.refusal(_request("10.1.2.3", _auth(*ROOT))) is None  # any address, with an admin's login
    assert access.refusal(_request("127.0.0.1", _auth("alice", "alice-secret"))).status == 401


@pytest.mark.parametrize("header, expected", [
    (_auth("u", "p:q"), ("u", "p:q")),
    (_auth("u", ""), ("u", "")),
    ("basic " + base64.b64encode(b"u:p").decode(), ("u", "p")),
    ("Bearer abc", None),
    ("Basic " + base64.b64encode(b"no-colon").decode(), None),
    ("Basic " + base64.b64encode(b"\xff\xfe:x").decode(), None),
    ("Basic ###", None),
])
def test_basic_credentials(header, expected):
    assert basic_credentials(_request("127.0.0.1", header)) == expected
