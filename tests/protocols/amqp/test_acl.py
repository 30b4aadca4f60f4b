"""aclEnable: AMQP logins (PLAIN with pika, AMQPLAIN with py-amqp) are the ACL file's
accounts, and each action needs the account's permission (PUB on the exchange's topic,
SUB on the queue, admin to declare)."""

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
