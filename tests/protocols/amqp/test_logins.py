"""Logins without aclEnable, as RabbitMQ's: one default account (guest / guest, or
amqp.defaultUser / amqp.defaultPass), anything else refused with connection.close 403 in
RabbitMQ's words, and the users of amqp.loopbackUsers (guest) only from a loopback address.

Every test client connects from 127.0.0.1, which is loopback, so the loopback rule's
refusal is tested on `Logins` itself with the peer address a session hands it (sans-IO);
over the wire, the tests show what configuration changes (another account, no loopback
users, no default account)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import amqp
import pika
import pytest
from pika.exceptions import ProbableAuthenticationError

from rocketport.core.config import BrokerConfig
from rocketport.protocols.amqp.access import Logins, LoginRefused
from tests.protocols.amqp.conftest import amqp_config
from tests.support.live_broker import LiveBroker, start_live_broker

REFUSED = "ACCESS_REFUSED - Login was refused using authentication mechanism {}. For details see the broker logfile."


def _broker(small_config, **amqp_section) -> LiveBroker:
    section = dataclasses.replace(BrokerConfig().amqp, port=0, **amqp_section)  # the shipped defaults
    return start_live_broker(dataclasses.replace(amqp_config(small_config), amqp=section))


@pytest.fixture
def default_broker(small_config) -> Iterator[LiveBroker]:
    live = _broker(small_config)
    try:
        yield live
    finally:
        live.stop()


def _pika(live: LiveBroker, user: str, password: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", live.endpoint("amqp")[1], credentials=pika.PlainCredentials(user, password),
        connection_attempts=1))


def _py_amqp_refusal(live: LiveBroker, user: str, password: str, method: str) -> amqp.exceptions.AccessRefused:
    conn = amqp.Connection(f"127.0.0.1:{live.endpoint('amqp')[1]}", userid=user, password=password,
                           login_method=method, connect_timeout=10)
    try:
        with pytest.raises(amqp.exceptions.AccessRefused) as refused:
            conn.connect()
    finally:
        conn.collect()
    return refused.value


def test_guest_logs_in_and_wrong_credentials_are_refused_as_rabbitmq_refuses_them(default_broker):
    with _pika(default_broker, "guest", "guest") as conn:
        conn.channel().queue_declare("logged-in")
    for user, password in (("guest", "wrong"), ("nobody", "guest"), ("", "")):
        with pytest.raises(ProbableAuthenticationError) as refused:
            _pika(default_broker, user, password)
        assert REFUSED.format("PLAIN") in str(refused.value)
    for method in ("PLAIN", "AMQPLAIN"):
        refusal = _py_amqp_refusal(default_broker, "guest", "nope", method)
        assert (refusal.reply_code, refusal.reply_text) == (403, REFUSED.format(method))


def test_another_default_account_replaces_guest(small_config):
    live = _broker(small_config, default_user="app", default_pass="s3cret", loopback_users=("app",))
    try:
        with _pika(live, "app", "s3cret") as conn:
            conn.channel().queue_declare("as-app")
        with pytest.raises(ProbableAuthenticationError):
            _pika(live, "guest", "guest")
    finally:
        live.stop()


def test_without_a_default_account_any_credentials_log_in(small_config):
    """amqp.defaultUser "": the behaviour before default accounts, for setups that rely on it."""
    live = _broker(small_config, default_user="", default_pass="")
    try:
        with _pika(live, "anyone", "anything") as conn:
            conn.channel().queue_declare("open")
    finally:
        live.stop()


PLAIN = b"\0guest\0guest"


def test_loopback_users_log_in_only_from_a_loopback_address():
    """RabbitMQ's loopback_users: 127.0.0.0/8 and ::1 are loopback; an empty list lets the
    default account in from anywhere; users not listed log in from anywhere."""
    logins = Logins(None, "guest", "guest", frozenset({"guest"}))
    for host in ("127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"):
        assert logins.login("PLAIN", PLAIN, host) is None
    for host in ("10.1.2.3", "192.168.0.7", "::ffff:10.0.0.1", "fe80::1%eth0", "2001:db8::1"):
        with pytest.raises(LoginRefused) as refused:
            logins.login("PLAIN", PLAIN, host)
        assert refused.value.reply_text == REFUSED.format("PLAIN")
        assert "can only connect via localhost" in str(refused.value)  # the log's reason
    anywhere = Logins(None, "guest", "guest", frozenset())
    assert anywhere.login("PLAIN", PLAIN, "10.1.2.3") is None
    other = Logins(None, "app", "pw", frozenset({"guest"}))
    assert other.login("PLAIN", b"\0app\0pw", "10.1.2.3") is None
    with pytest.raises(LoginRefused):
        other.login("PLAIN", b"\0app\0wrong", "127.0.0.1")
    with pytest.raises(LoginRefused):
        logins.login("EXTERNAL", b"", "127.0.0.1")  # a mechanism we do not offer
