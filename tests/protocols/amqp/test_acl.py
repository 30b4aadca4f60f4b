"""aclEnable: AMQP logins (PLAIN with pika, AMQPLAIN with py-amqp) are the ACL file's
accounts, and each action needs the account's permission (PUB on the exchange's topic,
SUB on the queue, admin to declare), named or by prefix (topicPrefixPerms)."""

from __future__ import annotations

from collections.abc import Iterator

import amqp
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ProbableAuthenticationError

from tests.protocols.amqp.conftest import amqp_config
from tests.protocols.amqp.test_pika import _get
from tests.support.live_broker import LiveBroker, start_live_broker

ACL = """\
accounts:
  - accessKey: alice
    secretKey: alice-secret
    defaultTopicPerm: DENY
    topicPerms:
      - events=PUB
      - readonly=SUB
      - inbox=SUB
  - accessKey: root
    secretKey: root-secret
    admin: true
  - accessKey: app
    secretKey: app-secret
    topicPrefixPerms:
      - orders.=PUB
      - orders.internal.=DENY
"""


@pytest.fixture
def acl_broker(small_config, tmp_path) -> Iterator[LiveBroker]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    live = start_live_broker(amqp_config(small_config, acl_enable=True, plain_acl_file=str(acl)))
    try:
        yield live
    finally:
        live.stop()


def _login(live: LiveBroker, user: str, password: str) -> pika.BlockingConnection:
    port = live.endpoint("amqp")[1]
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials(user, password)))


def test_accounts_and_permissions(acl_broker):
    with _login(acl_broker, "root", "root-secret") as admin:
        ch = admin.channel()
        ch.exchange_declare("events", "fanout")
        ch.exchange_declare("readonly", "fanout")
        ch.queue_declare("inbox")
        ch.queue_bind("inbox", "events")
    with pytest.raises(ProbableAuthenticationError):
        _login(acl_broker, "alice", "wrong")
    with _login(acl_broker, "alice", "alice-secret") as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("events", "", b"allowed")
        assert _get(ch, "inbox")[2] == b"allowed"
        with pytest.raises(ChannelClosedByBroker) as refused:
            ch.basic_publish("readonly", "", b"refused")
        assert refused.value.reply_code == 403
        with pytest.raises(ChannelClosedByBroker) as not_admin:
            conn.channel().queue_declare("mine")
        assert not_admin.value.reply_code == 403


def test_amqplain_login(acl_broker):
    port = acl_broker.endpoint("amqp")[1]
    conn = amqp.Connection(f"127.0.0.1:{port}", userid="root", password="root-secret",
                           login_method="AMQPLAIN", connect_timeout=10)
    conn.connect()
    try:
        ch = conn.channel()
        ch.queue_declare("amqplain-ok")
    finally:
        conn.close()
    bad = amqp.Connection(f"127.0.0.1:{port}", userid="root", password="nope", login_method="AMQPLAIN",
                          connect_timeout=10)
    with pytest.raises(amqp.exceptions.AccessRefused):
        bad.connect()


def test_prefix_permissions(acl_broker):
    """topicPrefixPerms decide a publish by the exchange's name, or through the default
    exchange the queue's: under a permitted prefix it is confirmed and routed, outside it
    (or under a DENY prefix within it) the channel is closed with 403 and nothing stored."""
    with _login(acl_broker, "root", "root-secret") as admin:
        ch = admin.channel()
        for exchange in ("orders.eu", "orders.internal.audit", "billing.eu"):
            ch.exchange_declare(exchange, "fanout")
        for queue, exchange in (("orders.inbox", "orders.eu"), ("billing.inbox", "billing.eu"),
                                ("orders.internal.log", "orders.internal.audit")):
            ch.queue_declare(queue)
            ch.queue_bind(queue, exchange)
    with _login(acl_broker, "app", "app-secret") as conn:
        ch = conn.channel()
        ch.confirm_delivery()  # raises unless acked
        ch.basic_publish("orders.eu", "", b"through the exchange")
        ch.basic_publish("", "orders.inbox", b"through the default exchange")
        for exchange, key in (("billing.eu", ""), ("", "billing.inbox"), ("orders.internal.audit", ""),
                              ("", "orders.internal.log")):
            refused_on = conn.channel()
            refused_on.confirm_delivery()
            with pytest.raises(ChannelClosedByBroker) as refused:
                refused_on.basic_publish(exchange, key, b"refused")
            assert refused.value.reply_code == 403, refused.value
            assert "ACCESS_REFUSED" in refused.value.reply_text and "'app'" in refused.value.reply_text
        assert ch.is_open  # the permitted channel is untouched by the others' refusals
    with _login(acl_broker, "root", "root-secret") as admin:
        ch = admin.channel()
        assert [_get(ch, "orders.inbox")[2] for _ in range(2)] == [b"through the exchange",
                                                                  b"through the default exchange"]
        for queue in ("orders.inbox", "billing.inbox", "orders.internal.log"):
            assert ch.queue_declare(queue, passive=True).method.message_count == 0, queue
